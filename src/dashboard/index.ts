// The live dashboard served at /dashboard on the admin surface: the page (page.ts), its JSON snapshot of regions,
// links, sync lag and per-key views (source.ts, key-view.ts, links.ts, metrics-reader.ts) and the chaos
// annotations the lab posts (annotations.ts).
export { DASHBOARD_PATH, registerDashboard } from './routes.ts';
export { createDashboardSource } from './source.ts';
