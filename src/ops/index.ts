// Running the pieces on one machine: redis-server processes on free ports (redis-process.ts), regional service
// processes (service-process.ts), the three-region local federation behind `npm start` (local-federation.ts,
// local-regions.ts) and `serve --workers N` (cluster-mode.ts).
export { freePort, startRedis } from './redis-process.ts';
export { startLocalFederation } from './local-federation.ts';
export { startServiceProcess } from './service-process.ts';
