// The redis-cost section of npm run bench: What one decision costs Redis.
import { type Bench, fmt } from '../bench.js';
import { ABLATION, LOSS_GUARD, benchRedisCost, medianOf as medianOfValues, type CostSide } from '../redis-cost.js';

export async function benchRedisCostSection(bench: Bench): Promise<void> {
  const { quick, out, target, results } = bench;
  const cost = await benchRedisCost(quick);
  out(
    `## What one decision costs Redis: µs of Redis per decision (INFO commandstats), ${cost.rounds} rounds × ${fmt(cost.decisions)} decisions, ${cost.callers} callers`,
  );
  out();
  out(
    "On a Redis of the section's own: after `CONFIG RESETSTAT`, the decisions of one kind, then `INFO commandstats`; " +
      "a decision's cost is the `usec` Redis counted for the top-level commands it sends (for a script, EVALSHA's, which " +
      'includes the commands run inside it; those are not added again) divided by the decisions. Ours and the peer ' +
      'alternate in each round (the order turning from round to round), each round on keys never used before; µs are ' +
      "medians over the rounds, the ratio is the median of the rounds' ratios (min–max beside it); decisions/s per " +
      'Redis core is 1e6 ÷ µs. Commands: every command Redis ran per decision, the top-level ones and those run inside scripts.',
  );
  out();
  out(
    '| script | decision | ours µs | ours decisions/s per Redis core | ours commands | peer (what it sends) | peer µs | peer decisions/s per Redis core | peer commands | ours ÷ peer (min–max) |',
  );
  out('| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |');
  const costRows: Array<Record<string, unknown>> = [];
  const ablations = cost.rows.filter((r) => r.script === ABLATION);
  const guardRows = cost.rows.filter((r) => r.script === LOSS_GUARD);
  const measuredRows = cost.rows.filter((r) => r.script !== ABLATION && r.script !== LOSS_GUARD);
  for (const r of measuredRows) {
    const us = medianOfValues(r.ours.usPerRound);
    const commands = medianOfValues(r.ours.commandsPerRound);
    const peerUs = r.peer === undefined ? Number.NaN : medianOfValues(r.peer.usPerRound);
    const peerCommands = r.peer === undefined ? Number.NaN : medianOfValues(r.peer.commandsPerRound);
    const ratioMedian = r.peer === undefined ? Number.NaN : medianOfValues(r.ratios);
    const spread = r.peer === undefined ? '' : ` (${fmt(Math.min(...r.ratios), 2)}–${fmt(Math.max(...r.ratios), 2)})`;
    out(
      `| ${r.script} | ${r.decision} | ${fmt(us, 2)} | ${fmt(1e6 / us)} | ${fmt(commands, 1)} | ${r.peer === undefined ? '–' : `${r.peer.name} (${r.peer.commands.join(' + ')})`} | ${fmt(peerUs, 2)} | ${fmt(1e6 / peerUs)} | ${fmt(peerCommands, 1)} | ${r.peer === undefined ? '–' : `${fmt(ratioMedian, 2)}×${spread}`} |`,
    );
    costRows.push({
      script: r.script,
      decision: r.decision,
      us,
      perSecondPerCore: 1e6 / us,
      commands,
      ...(r.peer === undefined
        ? {}
        : { peer: r.peer.name, peerUs, peerPerSecondPerCore: 1e6 / peerUs, peerCommands, ratio: ratioMedian }),
      ours: r.ours,
      ...(r.peer === undefined ? {} : { peerRounds: r.peer, ratios: r.ratios }),
    });
  }
  out();
  out(
    `Redis ${cost.pinned ? 'ran on a core of its own, the benchmark on the other(s) (taskset)' : 'shared the cores with the benchmark (taskset was not available)'}.`,
  );
  out();
  // What costs what: the commands inside each script, and the rest (what EVALSHA itself costs, an empty
  // script's row shows; the Lua code; each call's way from Lua to the command and back).
  out('### What costs what inside each decision (µs of Redis, medians over the rounds)');
  out();
  out(
    '| who | decision | µs in all | the commands inside, µs each | the rest: the script (EVALSHA, Lua, the calls’ passage) |',
  );
  out('| --- | --- | ---: | --- | ---: |');
  const seenSides = new Set<CostSide>();
  const partRows: Array<Record<string, unknown>> = [];
  for (const r of measuredRows)
    for (const side of [r.ours, ...(r.peer === undefined ? [] : [r.peer])]) {
      if (seenSides.has(side)) continue;
      seenSides.add(side);
      const commands = [...new Set(side.partsPerRound.flatMap((parts) => Object.keys(parts)))];
      const parts = commands
        .map((command) => ({ command, us: medianOfValues(side.partsPerRound.map((p) => p[command] ?? 0)) }))
        .sort((a, b) => b.us - a.us);
      const total = medianOfValues(side.usPerRound);
      const rest = medianOfValues(
        side.usPerRound.map((us, i) => us - Object.values(side.partsPerRound[i]!).reduce((a, b) => a + b, 0)),
      );
      const who = side === r.ours ? r.script : side.name;
      out(
        `| ${who} | ${r.decision} | ${fmt(total, 2)} | ${parts.map((p) => `${p.command.toUpperCase()} ${fmt(p.us, 2)}`).join(', ') || '–'} | ${fmt(rest, 2)} |`,
      );
      partRows.push({ who, decision: r.decision, us: total, parts, rest });
    }
  out();
  out(
    '### A script with one call taken out (copies of the script measured beside it, in alternating rounds; for measuring only)',
  );
  out();
  out(
    '| script | taken out | µs without it | µs of the script as it is | saved, µs (median of the rounds) | without ÷ as it is |',
  );
  out('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const r of ablations) {
    const saved = medianOfValues(r.ours.usPerRound.map((us, i) => r.peer!.usPerRound[i]! - us));
    out(
      `| ${r.decision.replace(/ without .*/, '')} | ${r.decision.replace(/^\S+ without /, '')} | ${fmt(medianOfValues(r.ours.usPerRound), 2)} | ${fmt(medianOfValues(r.peer!.usPerRound), 2)} | ${fmt(saved, 2)} | ${fmt(medianOfValues(r.ratios), 2)}× |`,
    );
    costRows.push({
      script: r.script,
      decision: r.decision,
      us: medianOfValues(r.ours.usPerRound),
      saved,
      ours: r.ours,
      whole: r.peer,
    });
  }
  out();
  out(
    "### The loss guard (issue 32): each script that runs it, beside a copy of it with the guard taken out (alternating rounds, each slot's guard started before the round, as in a running system; the copies for measuring only)",
  );
  out();
  out('| decision | µs with the guard | µs without it | with ÷ without (min–max) |');
  out('| --- | ---: | ---: | ---: |');
  for (const r of guardRows) {
    out(
      `| ${r.decision} | ${fmt(medianOfValues(r.ours.usPerRound), 2)} | ${fmt(medianOfValues(r.peer!.usPerRound), 2)} | ${fmt(medianOfValues(r.ratios), 2)}× (${fmt(Math.min(...r.ratios), 2)}–${fmt(Math.max(...r.ratios), 2)}) |`,
    );
    costRows.push({
      script: r.script,
      decision: r.decision,
      us: medianOfValues(r.ours.usPerRound),
      withoutUs: medianOfValues(r.peer!.usPerRound),
      ratio: medianOfValues(r.ratios),
      ours: r.ours,
      without: r.peer,
      ratios: r.ratios,
    });
  }
  out();
  const guardRatio = (decision: string): number => {
    const r = guardRows.find((g) => g.decision === decision);
    if (r === undefined) throw new Error(`redis-cost: no loss guard row ${decision}`);
    return medianOfValues(r.ratios);
  };
  target('admit (admitted) with the loss guard ÷ without it', guardRatio('admit: admitted'), 1.05, true);
  target('claimSession with the loss guard ÷ without it', guardRatio('claimSession: claimed'), 1.05, true);
  const ratioOf = (script: string, peer: string, decision: RegExp): number => {
    const r = cost.rows.find((c) => c.script === script && c.peer?.name === peer && decision.test(c.decision));
    if (r === undefined) throw new Error(`redis-cost: no row of ${script} beside ${peer}`);
    return medianOfValues(r.ratios);
  };
  target(
    'fixed window, Redis µs per decision (key never used) ÷ rate-limiter-flexible',
    ratioOf('fixedWindow', 'rate-limiter-flexible', /never used/),
    1.0,
    true,
  );
  target(
    'GCRA, Redis µs per decision (key never used) ÷ rate-limiter-flexible',
    ratioOf('gcra', 'rate-limiter-flexible', /never used/),
    1.0,
    true,
  );
  target(
    "lease acquire + release, Redis µs per pair ÷ redlock's pair",
    ratioOf('acquireLease + releaseLease', 'redlock', /pair/),
    1.0,
    true,
  );
  results['redisCost'] = {
    pinned: cost.pinned,
    rounds: cost.rounds,
    decisions: cost.decisions,
    callers: cost.callers,
    rows: costRows,
    parts: partRows,
  };
}
