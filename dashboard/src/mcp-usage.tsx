import { useEffect, useState } from 'preact/hooks';
import { api, type McpUsage } from './api.ts';
import { formatCount } from './format.ts';

/** The MCP tool calls of the period, by tool: shown under the model calls when there are any. */
export function McpUsageTable({ account, since }: { account: string; since: string }) {
  const [usage, setUsage] = useState<McpUsage | null>(null);
  useEffect(() => {
    let current = true;
    // Without MCP calls, or on a failure, the table is simply not shown: the model usage is the page's subject.
    api.mcpUsage(account, since).then(
      (data) => current && setUsage(data),
      () => current && setUsage(null),
    );
    return () => {
      current = false;
    };
  }, [account, since]);
  if (usage === null || usage.data.length === 0) return null;
  return (
    <section class="card" aria-labelledby="mcp-usage-title">
      <h2 id="mcp-usage-title">MCP tool calls</h2>
      <table aria-label="MCP tool calls by tool">
        <thead>
          <tr>
            <th scope="col">Tool</th>
            <th scope="col" class="number">
              Calls
            </th>
            <th scope="col" class="number">
              Failed
            </th>
            <th scope="col" class="number">
              Average time
            </th>
            <th scope="col" class="number">
              Bytes in / out
            </th>
          </tr>
        </thead>
        <tbody>
          {usage.data.map((row) => (
            <tr key={row.group}>
              <td>
                <code>{row.group}</code>
              </td>
              <td class="number">{formatCount(row.calls)}</td>
              <td class="number">{formatCount(row.failed)}</td>
              <td class="number">{formatCount(Math.round(row.duration_ms / row.calls))} ms</td>
              <td class="number">
                {formatCount(row.request_bytes)} / {formatCount(row.response_bytes)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
