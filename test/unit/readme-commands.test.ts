/**
 * The README's commands section read against the CLI: every command it lists exists, and every flag
 * it gives a command is one that command's `--help` lists. A flag dropped from a command, or a README
 * line that promises one, fails here.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { MESHP } from '../helpers/grpc-procs.js';

interface Listed {
  path: string[];
  flags: Set<string>;
  line: string;
}

/** The fenced block under "## The commands", one entry per command (alternatives `a|b` and ` | x` expanded). */
function readmeCommands(): Listed[] {
  const readme = readFileSync('README.md', 'utf8');
  const block = readme.split('## The commands')[1]!.split('```')[1]!;
  // A command's text: its `meshp …` line and the indented lines after it, comments dropped.
  const texts: string[] = [];
  for (const raw of block.split('\n')) {
    const line = raw.replace(/\s+#.*$/, '');
    if (line.startsWith('meshp ')) texts.push(line);
    else if (line.trim() && texts.length) texts[texts.length - 1] += ` ${line.trim()}`;
  }
  const out: Listed[] = [];
  for (const text of texts) {
    let path: string[] = [];
    let current: Listed[] = [];
    for (const [i, segment] of text.split(/\s\|\s/).entries()) {
      const words = segment.trim().split(/\s+/);
      if (i === 0) words.shift(); // meshp
      const lead: string[] = [];
      while (words.length && /^[a-z][a-z|-]*$/.test(words[0]!)) lead.push(words.shift()!);
      if (lead.length) {
        // A segment that names a command: the first, or one that replaces the last word (`list | show NODE`).
        path = i === 0 ? lead : [...path.slice(0, -1), ...lead];
        current = path[path.length - 1]!.split('|').map((alt) => ({ path: [...path.slice(0, -1), alt], flags: new Set<string>(), line: text }));
        out.push(...current);
      }
      for (const f of segment.match(/--[a-z][a-z-]*/g) ?? []) for (const c of current) c.flags.add(f);
    }
  }
  return out;
}

/** The flags `meshp PATH --help` lists. */
function helpFlags(path: string[]): { ok: boolean; flags: Set<string>; out: string } {
  const r = spawnSync(process.execPath, [MESHP, ...path, '--help'], { encoding: 'utf8' });
  const out = `${r.stdout}${r.stderr}`;
  return { ok: r.status === 0, flags: new Set(out.match(/--[a-z][a-z-]*/g) ?? []), out };
}

t.test("every command the README lists exists, with every flag it gives it in that command's --help", async (t) => {
  const listed = readmeCommands();
  t.ok(listed.length >= 30, `the README lists ${listed.length} commands`);
  for (const c of listed) {
    const help = helpFlags(c.path);
    t.ok(help.ok, `meshp ${c.path.join(' ')} --help answers`);
    const missing = [...c.flags].filter((f) => !help.flags.has(f));
    t.same(missing, [], `meshp ${c.path.join(' ')}: every flag the README gives it is in its --help`) || t.comment(c.line);
  }
});

t.test('meshp completion --help is help, not the completion script', async (t) => {
  const r = spawnSync(process.execPath, [MESHP, 'completion', '--help'], { encoding: 'utf8' });
  t.equal(r.status, 0);
  t.notMatch(r.stdout, /begin-meshp-completions/, 'no script');
  t.match(r.stdout, /meshp completion/, 'the usage line');
  const script = spawnSync(process.execPath, [MESHP, 'completion'], { encoding: 'utf8' });
  t.match(script.stdout, /begin-meshp-completions/, 'without --help: the script, as before');
});
