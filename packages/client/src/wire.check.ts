// Compile-time checks, run by `npm run typecheck` (never built into the package): the client's plain
// types are the contract's (packages/contract's zod schemas, what the API validates with), or tighter
// where the contract's JSON cannot say more. A change on either side that breaks this fails the build.
import type * as Contract from '@cq/contract';
import type { CoordinatorClient } from './client.js';
import type * as Wire from './wire.js';

/** True when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** True when every A is a B (the client's type is at least as tight as the contract's). */
type Within<A, B> = [A] extends [B] ? true : false;
const holds = <T extends true>(): T => true as T;

// The same shapes.
holds<Equal<Wire.SessionState, Contract.SessionState>>();
holds<Equal<Wire.SessionEventType, Contract.SessionEventType>>();
holds<Equal<Wire.ApiErrorCode, Contract.ApiErrorCode>>();
holds<Equal<Wire.Scope, Contract.Scope>>();
holds<Equal<Wire.IssueTokenRequest, Contract.IssueTokenRequest>>();
holds<Equal<Wire.IssuedToken, Contract.IssuedToken>>();
holds<Equal<Wire.Admission, Contract.Admission>>();
holds<Equal<Wire.LiveSession, Contract.LiveSession>>();
holds<Equal<Wire.UpdateSessionRequest, Contract.UpdateSessionRequest>>();
holds<Equal<Wire.SessionsPage, Contract.SessionsPage>>();
// The same values (one side an intersection, the other one object).
holds<Within<Wire.SessionById, Contract.SessionById>>();
holds<Within<Contract.SessionById, Wire.SessionById>>();
holds<Equal<Wire.BulkStopRequest, Contract.BulkStopRequest>>();
holds<Equal<Wire.BulkStopAccepted, Contract.BulkStopAccepted>>();
holds<Equal<Wire.StopAccepted, Contract.StopAccepted>>();
holds<Equal<Wire.EndedSession, Contract.EndedSession>>();
holds<Equal<Wire.Host, Contract.Host>>();
holds<Equal<Wire.HostIsolation, Contract.Host['isolation']>>();
holds<Equal<Wire.Hosts, Contract.Hosts>>();
holds<Equal<Wire.Pool, Contract.Pool>>();
holds<Equal<Wire.StreamErrorData, Contract.StreamErrorData>>();
holds<Equal<Wire.OutputLineData, Contract.OutputLineData>>();
holds<Equal<Wire.SessionLogs, Contract.SessionLogs>>();
holds<Equal<Wire.WebhookData, Contract.WebhookData>>();
holds<Equal<Wire.CreatedWebhook, Contract.CreatedWebhook>>();
holds<Equal<Wire.Whoami, Contract.Whoami>>();
holds<Within<Wire.ConnectRequest, NonNullable<Contract.ConnectRequest>>>();
holds<Equal<Wire.CommandRequest, Contract.CommandRequest>>();
holds<Equal<Wire.CommandResult, Contract.CommandResult>>();
holds<Equal<Wire.Connect, Contract.Connect>>();
// Tighter than the contract: every event's data is the contract's, discriminated by its type; a
// delivery's type is an event type.
holds<Within<Wire.SessionEventData, Contract.SessionEventData>>();
holds<Within<Wire.SessionEventData['type'], Contract.SessionEventData['type']>>();
holds<Equal<Wire.SessionEventData['type'], Contract.SessionEventData['type']>>();
holds<Within<Wire.Deliveries, Contract.Deliveries>>();
// The list's query as the client sends it: `limit` a number (the API also takes its text).
holds<Within<Wire.ListSessionsQuery, Contract.ListSessionsQuery>>();

// A wrong event name does not compile, wherever a client names one.
// @ts-expect-error: "finished" is not an event type
export const wrongType: Wire.SessionEventType = 'finished';
export async function wrongComparison(client: CoordinatorClient): Promise<void> {
  for await (const event of client.events({ userId: 'u' })) {
    // @ts-expect-error: no event is of type "complete" (it is "completed")
    if (event.type === 'complete') return;
    // Narrowed by its type: only a ready event has an endpoint, only an ended one an exit code.
    if (event.type === 'ready') holds<Equal<typeof event.endpoint, string | undefined>>();
    if (event.type === 'completed') holds<Equal<typeof event.exitCode, number | undefined>>();
  }
}
