// Working inside a session (the contract's "Working inside a session"): commands, files and terminals,
// each a command run inside the session by its host (command-channel.ts), reached through the same
// authenticated host listener as the session proxy (no second door into a host), from any API process.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { z } from 'zod';
import {
  COMMAND_OUTPUT_MAX_BYTES,
  COMMAND_TIMEOUT_DEFAULT_MS,
  commandRequest,
  commandResult,
  errorSchema,
  execQuery,
  filePathQuery,
  noQuery,
  sessionIdParams,
} from '@cq/contract';
import type { ExecRequest, ExecStatus } from '@cq/service-kit';
import type { ApiConfig } from '../config.js';
import { HttpError } from '../http-errors.js';
import { audit } from '../plugins/auth.js';
import { notConfigured } from '../proxy/plugin.js';
import { ProxyRefusal } from '../proxy/session-proxy.js';
import { CommandChannel, type CommandHandlers } from './command-channel.js';
import { EXEC_PROTOCOL, serveTerminal } from './terminal.js';
import { FILE_EXIT, READ_FILE, WRITE_FILE } from './session-files.js';

/** How long past its own time limit a command's host may take to say it ended, ms. */
const STATUS_SLACK_MS = 5000;

/** A command's output, kept to its first {@link COMMAND_OUTPUT_MAX_BYTES}. */
class Kept {
  readonly #chunks: Buffer[] = [];
  #length = 0;
  truncated = false;
  add(bytes: Buffer): void {
    const room = COMMAND_OUTPUT_MAX_BYTES - this.#length;
    if (bytes.length > room) this.truncated = true;
    if (room <= 0) return;
    const kept = bytes.length > room ? bytes.subarray(0, room) : bytes;
    this.#chunks.push(kept);
    this.#length += kept.length;
  }
  text(): string {
    return Buffer.concat(this.#chunks).toString('utf8');
  }
}

export const sessionExecPlugin = fp(
  async (root: FastifyInstance, options: { config: ApiConfig }) => {
    const app = root.withTypeProvider<ZodTypeProvider>();

    const reach = (reply: FastifyReply, sessionId: string): Promise<{ socket: Socket; userId: string }> =>
      reachHost(app, reply, sessionId);

    /** A command started inside the session. */
    const start = async (
      reply: FastifyReply,
      sessionId: string,
      request: ExecRequest,
      handlers: CommandHandlers,
    ): Promise<{ channel: CommandChannel; userId: string }> => {
      const { socket, userId } = await reach(reply, sessionId);
      return { channel: new CommandChannel(socket, request, handlers), userId };
    };

    /** The command's end: its status, or an error when the connection dropped first. */
    const ended = (): {
      handlers: Pick<CommandHandlers, 'onStatus' | 'onClose'>;
      done: Promise<ExecStatus>;
    } => {
      let resolve!: (status: ExecStatus) => void;
      let reject!: (err: Error) => void;
      const done = new Promise<ExecStatus>((res, rej) => ((resolve = res), (reject = rej)));
      // Awaited where it matters; a drop after the answer was decided is no one's error.
      done.catch(() => {});
      return {
        handlers: {
          onStatus: resolve,
          onClose: (dropped) => {
            if (dropped)
              reject(
                new HttpError(
                  'host_unreachable',
                  "The connection to the session's host dropped before the command ended; it is hung up.",
                ),
              );
          },
        },
        done,
      };
    };

    app.post(
      '/v1/sessions/:sessionId/commands',
      {
        config: { scope: 'sessions:exec' },
        schema: {
          summary: 'Runs a command inside a live session and answers its exit code and output',
          description:
            "The command runs in the session's namespaces, as its user, in its cgroups (its caps count it), with " +
            '`stdin` given and then closed. stdout and stderr are each kept to their first 1 MiB (`truncated`). ' +
            '408 command_timeout (with what it printed) when it outlives `timeoutMs` (it is killed with its ' +
            'processes); 404 no_session when the session is not live or ends meanwhile.',
          params: sessionIdParams,
          querystring: noQuery,
          body: commandRequest,
          response: {
            200: commandResult,
            400: errorSchema,
            404: errorSchema,
            408: errorSchema,
            502: errorSchema,
            503: errorSchema,
          },
        },
      },
      async (request, reply) => {
        const { sessionId } = request.params;
        const body = request.body;
        const timeoutMs = body.timeoutMs ?? COMMAND_TIMEOUT_DEFAULT_MS;
        const stdout = new Kept();
        const stderr = new Kept();
        const end = ended();
        const { channel, userId } = await start(
          reply,
          sessionId,
          {
            argv: body.argv,
            ...(body.env === undefined ? {} : { env: body.env }),
            ...(body.cwd === undefined ? {} : { cwd: body.cwd }),
            timeoutMs,
          },
          { onOutput: (ch, bytes) => (ch === 1 ? stdout : stderr).add(bytes), ...end.handlers },
        );
        audit(request, 'session.command', userId, { userId, sessionId, argv: body.argv });
        // A client that goes away hangs the command up.
        const hangUp = (): void => channel.hangUp();
        reply.raw.once('close', hangUp);
        const slack = setTimeout(hangUp, timeoutMs + STATUS_SLACK_MS);
        try {
          if (body.stdin !== undefined && body.stdin !== '') channel.write(Buffer.from(body.stdin));
          channel.closeStdin();
          const status = await end.done;
          const printed = {
            exitCode: status.exitCode,
            ...(status.signal === undefined ? {} : { signal: status.signal }),
            stdout: stdout.text(),
            stderr: stderr.text(),
            truncated: stdout.truncated || stderr.truncated,
          };
          if (status.reason === 'timeout')
            throw new HttpError(
              'command_timeout',
              `The command outlived its ${timeoutMs} ms and was killed with its processes.`,
              printed,
            );
          if (status.reason === 'session_ended')
            throw new HttpError('no_session', `Session ${sessionId} ended while the command ran.`, printed);
          if (status.reason === 'start_failed')
            throw new HttpError(
              'host_unreachable',
              `The session's host could not run the command: ${status.message ?? ''}`,
            );
          return printed;
        } finally {
          clearTimeout(slack);
          channel.hangUp();
        }
      },
    );

    app.get(
      '/v1/sessions/:sessionId/files',
      {
        config: { scope: 'sessions:exec' },
        schema: {
          summary: 'Reads a file of a live session, as the session sees its files (streamed)',
          description:
            'The file is read by the session’s own user in its own view: 403 path_forbidden where the session ' +
            'could not read it, 404 no_file where nothing is, 400 for a directory.',
          params: sessionIdParams,
          querystring: filePathQuery,
          response: {
            200: {
              description: 'The file’s bytes, as they are read',
              content: { 'application/octet-stream': { schema: z.string() } },
            },
            400: errorSchema,
            403: errorSchema,
            404: errorSchema,
            502: errorSchema,
            503: errorSchema,
          },
        },
      },
      async (request, reply) => {
        const { sessionId } = request.params;
        const { path } = request.query;
        const end = ended();
        let first!: () => void;
        const started = new Promise<void>((resolve) => (first = resolve));
        // Read before the command has started: resumed once it has (it is paused while the client lags).
        const reading: { channel?: CommandChannel } = {};
        const body = new Readable({ read: () => reading.channel?.resume() });
        const { channel } = await start(
          reply,
          sessionId,
          { argv: ['/bin/sh', '-c', READ_FILE, 'cq-read', path] },
          {
            onOutput: (ch, bytes) => {
              if (ch !== 1) return;
              first();
              // The client reads at its pace: the command waits for it (backpressure to the session).
              return body.push(bytes);
            },
            ...end.handlers,
          },
        );
        reading.channel = channel;
        channel.closeStdin();
        reply.raw.once('close', () => channel.hangUp());
        // The first byte of the file, or the end of the command without one, decides the answer.
        const status = await Promise.race([started.then(() => undefined), end.done]);
        if (status !== undefined) {
          const refusal = fileRefusal(status, path);
          if (refusal !== undefined) throw refusal;
        }
        end.done.then(
          (s) => (s.exitCode === 0 ? body.push(null) : body.destroy(new Error(`reading ${path} failed part way`))),
          (err: Error) => body.destroy(err),
        );
        // A stream, which the typed reply (its schema: a string of bytes) does not describe.
        return reply
          .type('application/octet-stream')
          .header('cache-control', 'no-store')
          .send(body as unknown as string);
      },
    );

    app.get(
      '/v1/sessions/:sessionId/exec',
      {
        config: { scope: 'sessions:exec' },
        schema: {
          summary: 'A command (a terminal with tty=true) inside a live session, over a WebSocket',
          description:
            'Upgrade to a WebSocket with subprotocol `v5.channel.k8s.io` (Kubernetes exec framing): each binary ' +
            "message's first byte is its channel: 0 stdin, 1 stdout, 2 stderr, 3 the status (JSON " +
            '`{"status": "Success"|"Failure", "exitCode", ...}`, always sent before a normal close), 4 resize ' +
            '(`{"Width", "Height"}`), 255 close a channel (`[255, 0]` closes stdin). With `tty=true` the command ' +
            'has a terminal of `cols`×`rows` (stdout and stderr one stream). A WebSocket that drops hangs the ' +
            "command up (SIGHUP, SIGKILL after the host's SESSION_GRACE_MS). 400 without an upgrade.",
          params: sessionIdParams,
          querystring: execQuery,
          response: {
            101: z.null().describe('Switching to the WebSocket'),
            400: errorSchema,
            404: errorSchema,
            502: errorSchema,
            503: errorSchema,
          },
        },
      },
      async (request, reply) => {
        const { sessionId } = request.params;
        let argv: string[] = ['/bin/sh'];
        if (request.query.argv !== undefined) {
          let parsed: unknown;
          try {
            parsed = JSON.parse(request.query.argv);
          } catch {
            parsed = undefined;
          }
          const checked = commandRequest.shape.argv.safeParse(parsed);
          if (!checked.success)
            throw new HttpError(
              'invalid_request',
              'Query parameter "argv" is not a JSON array of strings (1 to 4096 of them).',
            );
          argv = checked.data;
        }
        const tty = request.query.tty === 'true';
        await openTerminal(app, request, reply, sessionId, {
          argv,
          tty,
          ...(request.query.cols === undefined ? {} : { cols: request.query.cols }),
          ...(request.query.rows === undefined ? {} : { rows: request.query.rows }),
        });
      },
    );

    // The body of a file put is streamed to the session as it arrives, not parsed.
    await app.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
      scope.withTypeProvider<ZodTypeProvider>().put(
        '/v1/sessions/:sessionId/files',
        {
          config: { scope: 'sessions:exec' },
          schema: {
            summary: 'Writes a file into a live session, as the session sees its files (streamed)',
            description:
              'The body (any type, at most FILES_MAX_MB) is written by the session’s own user in its own view, ' +
              'whole or not at all: a file that was there stays as it was until the upload has ended. 403 ' +
              'path_forbidden where the session could not write, 404 no_file where its directory is missing, ' +
              '413 file_too_large, 507 no_space when the session’s filesystem is full.',
            params: sessionIdParams,
            querystring: filePathQuery,
            response: {
              204: z.null().describe('Written'),
              400: errorSchema,
              403: errorSchema,
              404: errorSchema,
              413: errorSchema,
              502: errorSchema,
              503: errorSchema,
              507: errorSchema,
            },
          },
        },
        async (request, reply) => {
          const { sessionId } = request.params;
          const { path } = request.query;
          const max = options.config.filesMaxBytes;
          const declared = Number(request.headers['content-length'] ?? 0);
          if (declared > max) {
            // Its body is not read: the connection closes after the answer.
            reply.header('connection', 'close');
            throw tooLarge(max);
          }
          const end = ended();
          const { channel, userId } = await start(
            reply,
            sessionId,
            { argv: ['/bin/sh', '-c', WRITE_FILE, 'cq-write', path] },
            { onOutput: () => {}, ...end.handlers },
          );
          audit(request, 'session.file_write', userId, { userId, sessionId, path });
          const upload = request.body as Readable;
          let sent = 0;
          reply.raw.once('close', () => {
            if (channel.status === undefined) channel.hangUp();
          });
          const sending = (async () => {
            try {
              for await (const chunk of upload) {
                sent += (chunk as Buffer).length;
                if (sent > max) throw tooLarge(max);
                if (!channel.write(chunk as Buffer)) await channel.drained();
              }
            } catch (err) {
              if (err instanceof HttpError) throw err;
              throw new HttpError(
                'invalid_request',
                `The upload was cut off after ${sent} bytes; nothing was written.`,
              );
            }
            channel.closeStdin();
          })();
          try {
            // The command may end first (a forbidden path, a full filesystem): its answer wins.
            const status = await Promise.race([end.done, sending.then(() => end.done)]);
            const refusal = fileRefusal(status, path);
            if (refusal !== undefined) throw refusal;
            return await reply.code(204).send(null);
          } catch (err) {
            // Whatever went wrong, nothing of this upload stays: the hangup removes the new file.
            channel.hangUp();
            // The rest of the body is not read: the connection closes after the answer.
            reply.header('connection', 'close');
            throw err;
          } finally {
            sending.catch(() => {});
          }
        },
      );
    });
  },
  { name: 'session-exec', dependencies: ['services', 'session-proxy'] },
);

/** A connection to the session's host for a new command; a refusal (no session, no host) as an HttpError. */
async function reachHost(
  app: FastifyInstance,
  reply: FastifyReply,
  sessionId: string,
): Promise<{ socket: Socket; userId: string }> {
  const proxy = app.sessionProxy;
  if (proxy === undefined) throw notConfigured();
  try {
    return await proxy.openCommand(sessionId);
  } catch (err) {
    if (!(err instanceof ProxyRefusal)) throw err;
    reply.headers(err.headers);
    throw new HttpError(err.code, err.message);
  }
}

/**
 * Upgrades `request` (authorized by its route) to the exec WebSocket running `exec` inside the session
 * (the API's route and the dashboard's terminal): a refusal before the upgrade is an HttpError, as HTTP.
 */
export async function openTerminal(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  sessionId: string,
  exec: ExecRequest,
): Promise<void> {
  if (String(request.headers.upgrade ?? '').toLowerCase() !== 'websocket')
    throw new HttpError(
      'invalid_request',
      `Open this route as a WebSocket (Upgrade: websocket, subprotocol ${EXEC_PROTOCOL}); ` +
        `POST /v1/sessions/${sessionId}/commands runs a command without one.`,
    );
  const { socket, userId } = await reachHost(app, reply, sessionId);
  audit(request, 'session.exec', userId, { userId, sessionId, argv: exec.argv, tty: exec.tty === true });
  reply.hijack();
  serveTerminal(
    request.raw,
    request.raw.socket as Socket,
    (handlers) => new CommandChannel(socket, exec, handlers),
    (how) => request.log.info({ sessionId, how }, 'exec WebSocket ended'),
  );
}

function tooLarge(max: number): HttpError {
  return new HttpError(
    'file_too_large',
    `The file is larger than FILES_MAX_MB (${max / 1024 / 1024} MiB); nothing was written.`,
  );
}

/** The answer for a file command that ended without doing its work; undefined when it did. */
function fileRefusal(status: ExecStatus, path: string): HttpError | undefined {
  if (status.exitCode === 0) return undefined;
  switch (status.exitCode) {
    case FILE_EXIT.noFile:
      return new HttpError('no_file', `Nothing is at ${path} (or its directory), as the session sees its files.`);
    case FILE_EXIT.forbidden:
      return new HttpError('path_forbidden', `The session itself may not do this at ${path}.`);
    case FILE_EXIT.directory:
      return new HttpError('invalid_request', `${path} is a directory, not a file.`);
    case FILE_EXIT.noSpace:
      return new HttpError('no_space');
  }
  if (status.reason === 'session_ended') return new HttpError('no_session', 'The session ended meanwhile.');
  return new HttpError(
    'host_unreachable',
    `The session's host could not finish (exit ${status.exitCode}${status.message === undefined ? '' : `: ${status.message}`}).`,
  );
}
