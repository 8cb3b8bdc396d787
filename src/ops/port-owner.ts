// Who listens on a local TCP port, read from Linux's /proc: a probe that answers on a port proves that *some*
// process serves it, not that the child just started does (another process may have taken the port between
// picking it and the child's bind).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** The socket inodes in LISTEN state (0A) on `port`, from /proc/net/tcp and tcp6. */
function listeningInodes(port: number): Set<string> | undefined {
  const inodes = new Set<string>();
  let readable = false;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    readable = true;
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A') continue;
      if (Number.parseInt(fields[1]!.split(':')[1] ?? '', 16) === port) inodes.add(fields[9]!);
    }
  }
  return readable ? inodes : undefined;
}

function socketInodes(pid: number): string[] {
  const found: string[] = [];
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return found;
  }
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) found.push(match[1]!);
    } catch {
      // closed while we looked
    }
  }
  return found;
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Whether process `pid` (or one of its children, for node:cluster workers) holds the socket listening on `port`;
 * `undefined` where /proc cannot tell (not Linux).
 *
 * @example
 * ```ts
 * if (listensOn(child.pid, 8081) === false) throw new Error('another process answers on 8081');
 * ```
 */
export function listensOn(pid: number, port: number): boolean | undefined {
  const inodes = listeningInodes(port);
  if (inodes === undefined) return undefined;
  if (inodes.size === 0) return false;
  return [pid, ...childrenOf(pid)].some((owner) => socketInodes(owner).some((inode) => inodes.has(inode)));
}
