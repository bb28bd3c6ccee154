// The runtime's side of an `egress` session's start (isolation.ts has the session's side): the session's
// program says `netns` on its fd 4 once its network namespace is made (before anything of the session
// runs); slirp4netns is then started on that namespace, and the program told `go` once the network is
// configured. Anything else, or a failure, and the session is killed before anything of its own ran.

/** slirp4netns for one session: `ready` once it configured the namespace. */
export interface Egress {
  readonly ready: Promise<void>;
  stop(): void;
}

/** What {@link followEgressStep} tells the runtime. */
export interface EgressStepHooks {
  /** The session has ended meanwhile: nothing more is done. */
  ended(): boolean;
  /** slirp4netns runs for it (stopped when the session ends). */
  started(egress: Egress): void;
  /** Its network could not be made: the session is to be killed. */
  failed(why: string): void;
}

/** Follows the step on `step` (the session's fd 4) for the session whose first process is `pid`. */
export function followEgressStep(
  step: (NodeJS.ReadableStream & NodeJS.WritableStream) | null | undefined,
  pid: number | undefined,
  startEgress: ((pid: number) => Egress) | undefined,
  hooks: EgressStepHooks,
): void {
  const fail = (why: string): void => {
    if (!hooks.ended()) hooks.failed(why);
  };
  if (step === null || step === undefined || startEgress === undefined || pid === undefined) {
    fail('no egress helper');
    return;
  }
  step.on('error', () => {});
  let said = '';
  const onData = (chunk: Buffer): void => {
    said += chunk.toString();
    if (!said.includes('\n')) return;
    step.removeListener('data', onData);
    if (said !== 'netns\n' || hooks.ended()) {
      fail(`unexpected "${said.trim()}"`);
      return;
    }
    const egress = startEgress(pid);
    hooks.started(egress);
    egress.ready.then(
      () => {
        if (!hooks.ended()) step.write('go\n');
      },
      (err: Error) => fail(err.message),
    );
  };
  step.on('data', onData);
}
