// Tables: every section returns rows; they print as Markdown on stdout and go into the JSON report.
export type Cell = string | number | boolean | null | undefined;
export type Row = Record<string, Cell>;

export interface Table {
  id: string;
  title: string;
  columns: string[];
  rows: Row[];
  notes?: string[];
}

function show(cell: Cell): string {
  if (cell === null || cell === undefined) return '–';
  if (typeof cell === 'number') {
    if (!Number.isFinite(cell)) return String(cell);
    if (Number.isInteger(cell)) return cell.toLocaleString('en-US');
    return Math.abs(cell) >= 100 ? Math.round(cell).toLocaleString('en-US') : String(Math.round(cell * 1000) / 1000);
  }
  return String(cell).replace(/\|/g, '\\|');
}

export function renderTable(table: Table): string {
  const lines = [`### ${table.title}`, '', `| ${table.columns.join(' | ')} |`, `| ${table.columns.map(() => '---').join(' | ')} |`];
  for (const row of table.rows) lines.push(`| ${table.columns.map((column) => show(row[column])).join(' | ')} |`);
  for (const note of table.notes ?? []) lines.push('', `${note}`);
  return lines.join('\n');
}
