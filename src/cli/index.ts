// The command line: `quotafed serve | check-config | launch` (main.ts parses the arguments; bin/quotafed.js runs
// it), the regional service under node:cluster (`serve --workers N`, via ops/cluster-mode.ts) and the
// three-region local launcher behind `npm start` (launch.ts). Nothing here is imported by the library.
export { checkConfigCommand, serveCommand } from './serve.ts';
