#!/bin/sh
# A hostile session for the containment tests (SESSION_COMMAND="exec /bin/sh test/support/hostile-session.sh
# <observer file>"). What it does is the part of USER_ID before the first '-'; every process it leaves
# behind writes "userId fence epoch-ms pid role" to the observer file every 50 ms, so the test can see
# from outside what still runs. SESSION_METADATA's "durationMs" ends the main process after that long
# (exit 0), leaving its daemons behind.
file=$1
mode=${USER_ID%%-*}
beat() { # beat <role>: a heartbeat loop, forever
  while :; do
    echo "$USER_ID $FENCE $(date +%s%3N) $$ $1" >> "$file"
    sleep 0.05
  done
}
duration=$(printf '%s' "$SESSION_METADATA" | sed -n 's/.*"durationMs": *\([0-9]*\).*/\1/p')
main_loop() {
  if [ -n "$duration" ]; then
    # The main process beats until its duration is over, then exits 0: what it started stays behind.
    end=$(( $(date +%s%3N) + duration ))
    while [ "$(date +%s%3N)" -lt "$end" ]; do echo "$USER_ID $FENCE $(date +%s%3N) $$ main" >> "$file"; sleep 0.05; done
    exit 0
  fi
  beat main
}
case "$mode" in
  daemon) # a daemon the usual way: a new process session, away from the session's group
    setsid -f /bin/sh -c 'while :; do echo "$USER_ID $FENCE $(date +%s%3N) $$ daemon" >> "$0"; sleep 0.05; done' "$file"
    main_loop ;;
  fork2) # a double fork: the grandchild is orphaned, and leaves the group with setsid
    ( setsid /bin/sh -c 'while :; do echo "$USER_ID $FENCE $(date +%s%3N) $$ daemon" >> "$0"; sleep 0.05; done' "$file" & ) &
    main_loop ;;
  bystander) beat main ;;
  nonewline) # 1.5 GB on stdout without a newline, then beats
    head -c 1500000000 /dev/zero | tr '\0' x
    beat main ;;
  lines) # about 10 MB/s of short lines
    ( while :; do yes 'a short line of output, forty-four bytes long' | head -c 10485760; sleep 1; done ) &
    beat main ;;
  notify) # junk on SESSION_NOTIFY_FD as fast as it goes, in lines and without
    ( yes '{"ready": maybe}' >&3 ) &
    ( head -c 500000000 /dev/zero | tr '\0' '{' >&3 ) &
    beat main ;;
  killer) # SIGKILL to every pid in the file named by the metadata's "pids" (the host, its runtime, a neighbour)
    pids=$(printf '%s' "$SESSION_METADATA" | sed -n 's/.*"pidFile": *"\([^"]*\)".*/\1/p')
    for pid in $(cat "$pids"); do
      if kill -9 "$pid" 2>/dev/null; then echo "killed $pid"; else echo "could not kill $pid"; fi
    done
    cat /proc/*/environ 2>/dev/null | tr '\0' '\n' | grep -c '^REDIS_URL=' | sed 's/^/environments with REDIS_URL seen: /'
    beat main ;;
  memory) # 400 MB in the session's main process
    exec perl -e '$x = "x" x (400 * 1024 * 1024); sleep 60' ;;
  forkbomb) # processes without end: each starts two more and stays
    bomb() { bomb & bomb & sleep 600; }
    bomb &
    # The main process beats without forking (perl): sh's beat forks date and sleep, and once the bomb
    # fills the session's pids cap a refused fork ends sh ("Cannot fork"), the session with it, and
    # every process of it before the test could count them.
    exec perl -MTime::HiRes=time -e 'while (1) { open(my $f, ">>", $ARGV[0]) or die; printf $f "%s %s %d %d main\n", $ENV{USER_ID}, $ENV{FENCE}, int(time() * 1000), $$; close $f; select(undef, undef, undef, 0.05) }' "$file" ;;
  *) beat main ;;
esac
