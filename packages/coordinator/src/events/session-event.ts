import { terminalStates, type TerminalReason } from '../session-types.js';

/**
 * How long every event is kept in its slot's stream, ms: the Lua side trims older entries and lets an
 * idle stream expire after this (`EVENT_RETENTION_MS` in `lua/includes/events.lua`; a test checks the
 * two agree). A reader may resume from any event younger than this.
 */
export const EVENT_RETENTION_MS = 15 * 60_000;

/** The type of a session event: one per state change, `withdrawn` for an admission rolled back. */
export type SessionEventType = 'pending' | 'running' | 'ready' | 'stopping' | FinalEventType;

/** The type of an event after which a session has ended (`withdrawn`: it never was). */
export type FinalEventType = (typeof terminalStates)[number] | 'withdrawn';

/** Event types after which a session has ended (`withdrawn`: it never was). */
export const finalEventTypes: ReadonlySet<SessionEventType> = new Set<FinalEventType>([...terminalStates, 'withdrawn']);

/** Where an event stands in the one order every reader sees: its stream entry id, then its slot. */
export interface EventPosition {
  readonly ms: number;
  readonly seq: number;
  readonly slot: number;
}

/** One state change of one session, as the script that made it recorded it. */
export interface SessionEvent {
  /** `<ms>-<seq>-<slot>`: the entry id in its slot's stream, and the slot. Orders all events. */
  readonly id: string;
  readonly position: EventPosition;
  readonly type: SessionEventType;
  readonly sessionId: string;
  readonly userId: string;
  readonly fence: number;
  /** When the change happened (Redis TIME), epoch ms. */
  readonly at: number;
  /** The session's pool (absent on events written before sessions had pools: `default`). */
  readonly pool?: string;
  /** The session's labels at the change (absent on events written before sessions had labels: none). */
  readonly labels?: Readonly<Record<string, string>>;
  /** `running`, `ready`, `stopping` and endings of a claimed session: the host that runs it. */
  readonly workerId?: string;
  /** `ready`: where the session can be reached, when it said. */
  readonly endpoint?: string;
  /** `ready`: the port the session proxy opens by default, when it said. */
  readonly port?: number;
  /** `running`: when the lifetime cap runs out, epoch ms. */
  readonly deadline?: number;
  /** `pending`: the lifetime it will have once started, ms. */
  readonly lifetimeMs?: number;
  /** Endings: the process's exit code, when there is one. */
  readonly exitCode?: number;
  /** Endings: why, where known (`lost`: `host_lost`, `not_claimed` or `state_lost`; `failed`: `out_of_memory`). */
  readonly reason?: TerminalReason;
}

/** An event as a user's stream carries it: the first one (the current state) has no place in the order. */
export type UserEvent = Omit<SessionEvent, 'id' | 'position'>;
