// Helpers for run.sh that need a YAML parser or JSON, run with the pinned
// Node from .cache/conformance (whose node_modules provide "yaml").
//
//   node report.cjs baseline <expected-failures.yml> <revision> <out.yml>
//     Writes the revision's section of the expected-failures file as a
//     baseline the suite accepts ({server: [...]}). A section per revision is
//     needed because a stale entry fails a run: a scenario that fails in one
//     era and passes in the other may be listed for that era only.
//
//   node report.cjs summary <requirements.yml> <results-dir> <revision> <baseline.yml> [<expected-failures.yml>]
//     Prints how the revision's required server scenarios fared, from the
//     checks.json files the suite wrote. A scenario fails when any check is
//     FAILURE or WARNING, which is how the suite judges a baseline. With
//     the expected-failures file, the scenarios its revision section lists
//     under "required" are required too, though the suite does not score
//     them (extensions Switchboard implements).
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

function baseline(file, revision, out) {
  const doc = YAML.parse(fs.readFileSync(file, "utf8")) ?? {};
  const section = doc[revision] ?? {};
  const server = section.server ?? [];
  if (!Array.isArray(server)) throw new Error(`${file}: ${revision}.server must be a list`);
  fs.writeFileSync(out, YAML.stringify({ server }));
}

// latestChecks returns the checks of a scenario's latest result directory,
// or undefined when the scenario left none.
function latestChecks(resultsDir, dirs, scenario) {
  const prefix = `server-${scenario.replaceAll("/", "-")}-`;
  const dir = dirs.filter((d) => d.startsWith(prefix) && /^\d{4}-\d\d-\d\dT/.test(d.slice(prefix.length))).sort().pop();
  const file = dir && path.join(resultsDir, dir, "checks.json");
  return file && fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : undefined;
}

const failing = (c) => c.status === "FAILURE" || c.status === "WARNING";

function summary(requirementsFile, resultsDir, revision, baselineFile, expectedFile) {
  const requirements = YAML.parse(fs.readFileSync(requirementsFile, "utf8"));
  const ownRequired = expectedFile ? ((YAML.parse(fs.readFileSync(expectedFile, "utf8")) ?? {})[revision]?.required ?? []) : [];
  if (!Array.isArray(ownRequired)) throw new Error(`${expectedFile}: ${revision}.required must be a list`);
  const required = [...(requirements.server ?? []), ...ownRequired.filter((s) => !(requirements.server ?? []).includes(s))];
  // Baseline entries are "scenario" (every check may fail) or
  // "scenario:check-id" (that check may fail).
  const entries = (YAML.parse(fs.readFileSync(baselineFile, "utf8"))?.server ?? []).map(String);
  const isExpected = (scenario, checkId) => entries.includes(scenario) || entries.includes(`${scenario}:${checkId}`);
  const dirs = fs.existsSync(resultsDir) ? fs.readdirSync(resultsDir) : [];
  const counts = { passed: 0, expected: 0, unexpected: 0, missing: 0 };
  const lines = [];
  for (const scenario of required) {
    const checks = latestChecks(resultsDir, dirs, scenario);
    if (!checks) {
      counts.missing++;
      lines.push(`  ? ${scenario}: no results`);
      continue;
    }
    const bad = checks.filter(failing);
    if (bad.length === 0) {
      counts.passed++;
      continue;
    }
    const known = bad.every((c) => isExpected(scenario, c.id));
    counts[known ? "expected" : "unexpected"]++;
    lines.push(`  ${known ? "~" : "✗"} ${scenario}: ${bad.map((c) => c.id).join(", ")}${known ? " (expected)" : ""}`);
  }
  console.log(
    `${revision}: ${required.length} required server scenarios` +
      (ownRequired.length ? ` (${ownRequired.length} of them required by Switchboard)` : "") +
      `: ${counts.passed} passed, ` +
      `${counts.expected} failed as expected, ${counts.unexpected} failed unexpectedly` +
      (counts.missing ? `, ${counts.missing} produced no results` : ""),
  );
  for (const l of lines) console.log(l);
  // Not-scored scenarios (extensions, pending) never fail a run; they are
  // listed so that a regression in them is still visible.
  const notScored = (requirements.not_scored ?? []).filter(
    (e, i, all) =>
      e.leg === "server" && !required.includes(e.scenario) && all.findIndex((o) => o.leg === "server" && o.scenario === e.scenario) === i,
  );
  const notScoredFailing = notScored.filter((e) => (latestChecks(resultsDir, dirs, e.scenario) ?? [{ status: "FAILURE" }]).some(failing));
  if (notScored.length > 0) {
    console.log(
      `  not scored: ${notScored.length - notScoredFailing.length} of ${notScored.length} pass` +
        (notScoredFailing.length ? `; failing: ${notScoredFailing.map((e) => `${e.scenario} (${e.reason})`).join(", ")}` : ""),
    );
  }
  // No results for a required scenario means the run did not happen as
  // intended; never let that pass as success. A scenario the suite does
  // not score fails the run here, as the suite's own verdict leaves it out.
  return counts.missing > 0 || counts.unexpected > 0 ? 1 : 0;
}

const [cmd, ...args] = process.argv.slice(2);
try {
  if (cmd === "baseline" && args.length === 3) baseline(...args);
  else if (cmd === "summary" && (args.length === 4 || args.length === 5)) process.exitCode = summary(...args);
  else throw new Error("usage: report.cjs baseline FILE REVISION OUT | summary REQUIREMENTS RESULTS REVISION BASELINE");
} catch (err) {
  console.error(`report.cjs: ${err.message}`);
  process.exitCode = 2;
}
