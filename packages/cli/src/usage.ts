/** The help text: printed by `cq help`, `--help` and a bare `cq` (a usage error prints one line pointing here). */
export const USAGE = `cq: drive the worker coordinator's HTTP API

usage: cq <command> [arguments] [--url URL] [--key KEY] [--json]

commands:
  token <userId> [--metadata JSON] [--ttl MS] [--lifetime MS] [--idle MS] [--label k=v ...] [--pool P]
                                                                issue a one-time spawn token (--idle: stop the session
                                                                after MS without activity; 0 never; --label repeatable)
  spawn <token>                                                 admit a spawn with a token
  spawn --user <userId> [--metadata JSON] [--ttl MS] [--lifetime MS] [--idle MS] [--label k=v ...] [--pool P]
                                                                issue a token with those options (as token does) and
                                                                spawn with it
  status <userId>                                               the user's live session (with its idle timeout and last activity)
  session <sessionId>                                           a session by its id: live, or ended (as its history entry)
  extend <userId> <ms> [--session ID]                           the live session now ends <ms> from now (sooner or later);
                                                                a pending one gets that lifetime once started
  labels <userId> [k=v ...] [k- ...] [--session ID]             set (k=v) and remove (k-) the live session's labels, all or
                                                                none; without changes, print them
  activity <userId> [--session ID]                              the session is in use: a running one's idle clock starts again
  stop <userId> [--session ID]                                  stop the user's live session (also: stop --user <userId>)
  stop --label k=v [--state S] [--pool P] [--worker W] [--user U]
                                                                stop every live session the filters match (--user alone is
                                                                the single user's stop above)
  ls [--state S] [--pool P] [--worker W] [--user U] [--label k=v ...] [--limit N]
                                                                the live sessions of every user (every filter must match)
  history <userId>                                              the user's ended sessions
  logs <userId> [--follow]                                      the output of the live session, else of the latest ended one
                                                                (--follow: print new lines until the session ends)
  watch <userId> [--next]                                       follow the live session until it ends; with none, say how the
                                                                last one ended, or (--next, or a user who never had one) wait
                                                                for the user's next session and follow it
  events [--after ID]                                           every session event of every user as it happens, until
                                                                interrupted (--after: resume just after that event id)
  hosts [--pool P]                                              the live worker hosts (of one pool) and the free slots
  pools                                                         every pool: its hosts, slots, busy, free and pending sessions
  drain <workerId>                                              drain a worker host: no new sessions, exit 0 after its last one
  webhooks [list]                                               the webhooks (without secrets)
  webhooks create <url> [--events a,b]                          a webhook for those session events (all when absent); prints its secret once
  webhooks delete <id> | webhooks deliveries <id>               delete one (its pending deliveries stop) | its delivery attempts
  whoami                                                        the key's name and scopes
  open <userId> [--port P] [--browser]                          a URL that opens a port of the user's live session (its
                                                                ready port by default) in a browser; --browser opens it
  forward <userId> <localPort>:<port>                           serve a port of the user's live session on 127.0.0.1:
                                                                <localPort>, through the API, until interrupted
  exec <userId> [-i|--interactive] [-t|--tty] -- <command> [args...]
                                                                run a command in the user's live session; exit with its
                                                                status (-i: our stdin is its stdin, else closed at once;
                                                                -t: a terminal, ours raw, resized with the window)
  cp <file> <userId>:<path> | cp <userId>:<path> <file>         copy a file into or out of the user's live session, streamed
                                                                (<path> absolute, as the session sees it; - is stdin/stdout)
  demo [--users N]                                              spawn sessions for a few users and show what happens

options of every command:
  --url URL    the API (default: $CQ_API_URL, else http://127.0.0.1:3000)
  --key KEY    a service key (default: $CQ_API_KEY; ./scripts/up.sh keeps its key in .data/dev-api-key)
  --json       print JSON instead of text
  -h, --help   this text
any other option only with a command whose line above names it (else a usage error), e.g.:
  --session ID act only if the user's live session is this one (else 409 session_mismatch, exit 9)

output: text shows each control character in what the API sent (session output, endpoints, ids, URLs,
errors) as a visible escape (\\x1b, \\r, \\n, \\u202e), so none can drive the terminal; --json prints it exactly.

session states: pending, running, running (ready) once the session announced it is ready, stopping; then
completed, failed, expired, stopped or lost (status, watch and demo use the same words).

exit codes: 0 ok, 1 internal error, 2 usage, 3 unauthorized, 4 token invalid, 5 no session,
6 session exists, 7 throttled, 8 unavailable or no capacity (or a stream that closed for good),
9 other refusal (session_mismatch with --session among them), 14 no such host, 15 no such webhook,
16 the key lacks the scope (forbidden); watch: 10 failed, 11 expired, 12 stopped, 13 lost (0 completed).
`;
