// The dashboard's event stream as the tests read it.
import type { DashboardSnapshot } from '../../src/dashboard/types.ts';

/** The first snapshot the dashboard streams. */
export async function dashboardSnapshot(url: string): Promise<DashboardSnapshot> {
  const response = await fetch(`${url}/dashboard/events`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) throw new Error('the dashboard stream ended before a snapshot');
      buffer += decoder.decode(value, { stream: true });
      const block = buffer.split('\n\n').find((part) => part.includes('event: snapshot') && part.includes('\ndata: '));
      if (block)
        return JSON.parse(
          block
            .split('\n')
            .find((line) => line.startsWith('data: '))!
            .slice(6),
        ) as never;
    }
  } finally {
    await reader.cancel();
  }
}
