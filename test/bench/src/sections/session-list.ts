// The session-list section of npm run bench: The session list: a page's cost, whatever the number of sessions.
import { type Bench, fmt } from '../bench.js';
import { benchSessionList } from '../session-list.js';

export async function benchSessionListSection(bench: Bench): Promise<void> {
  const { quick, out, target, results } = bench;
  const list = await benchSessionList(quick);
  out('## The session list: Redis per page of 100 (GET /v1/sessions), and per dashboard refresh');
  out();
  out(
    "Live sessions admitted for real (tokens and admissions, one in ten labelled), on a Redis of the section's own; " +
      'each figure after CONFIG RESETSTAT: every command Redis ran (inside scripts included) and the µs of the ' +
      "top-level ones. In-process (the coordinator's list, the Redis work GET /v1/sessions does). The dashboard " +
      "before: every slot's live index and recent endings (2 × 16,384 commands), then 50 sessions; after: a page of 50 " +
      "of the list (its recent endings come from the process's event ring); both with the hosts and the capacity.",
  );
  out();
  out(
    '| live sessions | first page: commands / µs | middle page: commands / µs | label filter (1 in 10): commands / µs (found) | dashboard before: commands / µs | dashboard after: commands / µs |',
  );
  out('| ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of list.rows)
    out(
      `| ${fmt(r.sessions)} | ${fmt(r.firstPage.commands)} / ${fmt(r.firstPage.us)} | ${fmt(r.middlePage.commands)} / ${fmt(r.middlePage.us)} | ${fmt(r.filteredPage.commands)} / ${fmt(r.filteredPage.us)} (${r.filteredPage.found}) | ${fmt(r.dashboardBefore.commands)} / ${fmt(r.dashboardBefore.us)} | ${fmt(r.dashboardAfter.commands)} / ${fmt(r.dashboardAfter.us)} |`,
    );
  out();
  const first = list.rows[0]!;
  const last = list.rows[list.rows.length - 1]!;
  target(
    `list page of 100: Redis µs with ${fmt(last.sessions)} live sessions ÷ with ${fmt(first.sessions)} (in proportion to the page, not the sessions)`,
    last.firstPage.us / first.firstPage.us,
    2,
    true,
  );
  results['sessionList'] = list;
}
