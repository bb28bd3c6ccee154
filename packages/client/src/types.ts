/** States of a session (see the contract). */
export type SessionState = 'pending' | 'running' | 'stopping' | 'completed' | 'failed' | 'expired' | 'stopped' | 'lost';

export interface IssueTokenRequest {
  userId: string;
  metadata?: Record<string, unknown>;
  ttlMs?: number;
  lifetimeMs?: number;
}

export interface IssuedToken {
  token: string;
  userId: string;
  /** ISO-8601, UTC. */
  expiresAt: string;
}

export interface Admission {
  sessionId: string;
  userId: string;
  fence: number;
  state: 'pending';
  lifetimeMs: number;
}

export interface LiveSession {
  sessionId: string;
  userId: string;
  fence: number;
  state: 'pending' | 'running' | 'stopping';
  workerId?: string;
  startedAt?: string;
  leaseExpiresAt?: string;
  deadline?: string;
}

export interface StopAccepted {
  sessionId: string;
  userId: string;
  state: 'stopping' | 'stopped';
}

export interface EndedSession {
  sessionId: string;
  fence: number;
  state: 'completed' | 'failed' | 'expired' | 'stopped' | 'lost';
  workerId?: string;
  startedAt?: string;
  endedAt: string;
  exitCode?: number;
}
