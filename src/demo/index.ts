// The demo upstream that `npm start` and docker compose put behind the regional gateways (it echoes the request
// it was forwarded). Not used by the service itself.
export { DEMO_UPSTREAM_PORT, startDemoUpstream } from './upstream.ts';
