// `npx tsx tools/dashboard-demo/main.ts`: three regions with live dashboards on this machine until Ctrl-C.
import { fileURLToPath } from 'node:url';
import { startDashboardDemo } from './demo.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const demo = await startDashboardDemo({ root, log: (line) => process.stderr.write(`${line}\n`) });
for (const region of demo.regions) process.stdout.write(`${region.name.padEnd(9)} ${region.dashboardUrl}  (service ${region.url})\n`);
process.stdout.write('Ctrl-C to stop.\n');
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  demo.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
