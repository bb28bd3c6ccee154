// Files in and out of a session, run as commands inside it (command-channel.ts): a file is read and
// written by the session's own user, in its own mount namespace, so it sees exactly what the session
// sees: the host read-only, its /tmp and SESSION_DIR, a symlink followed as the session would follow it,
// `..` and /proc/<pid>/root resolved in its view (its /proc shows only its own processes). Nothing here
// resolves a path on the host. The scripts answer in exit codes, before any byte of the file.

/** Exit codes of the file scripts, and what the API answers for each. */
export const FILE_EXIT = {
  /** Nothing at the path (or its directory, for a write). */
  noFile: 44,
  /** The session itself could not read or write it. */
  forbidden: 43,
  /** A directory, not a file. */
  directory: 45,
  /** The write failed part way (the filesystem is full): nothing was written. */
  noSpace: 46,
} as const;

/** Reads `$1` to stdout. */
export const READ_FILE = [
  'p=$1',
  `[ -e "$p" ] || exit ${FILE_EXIT.noFile}`,
  `[ -d "$p" ] && exit ${FILE_EXIT.directory}`,
  // Opened as the session's user: the kernel says whether it may (a shell's `test -r` trusts root). In
  // a subshell: a redirection that fails ends the shell it is made in.
  `(: < "$p") 2>/dev/null || exit ${FILE_EXIT.forbidden}`,
  'exec cat -- "$p"',
].join('\n');

/**
 * Writes stdin to `$1`, whole or not at all: into a new file beside it, renamed over it once stdin has
 * ended (a file that was there keeps its mode). A hangup (the upload dropped, or was over FILES_MAX_MB)
 * removes the new file and leaves the old one as it was.
 */
export const WRITE_FILE = [
  'p=$1',
  `case "$p" in */) exit ${FILE_EXIT.directory};; esac`,
  // A symlink is followed as the session's own open() would (a dangling one names the file to make).
  `if [ -L "$p" ]; then p=$(readlink -f -- "$p") || exit ${FILE_EXIT.noFile}; fi`,
  'd=$(dirname -- "$p")',
  `[ -d "$d" ] || exit ${FILE_EXIT.noFile}`,
  `[ -d "$p" ] && exit ${FILE_EXIT.directory}`,
  // A file there must open for writing (appending, which changes nothing) as it would for the session.
  `if [ -e "$p" ]; then (exec 3>> "$p") 2>/dev/null || exit ${FILE_EXIT.forbidden}; fi`,
  `t=$(mktemp "$d/.cq-upload.XXXXXX" 2>/dev/null) || exit ${FILE_EXIT.forbidden}`,
  `trap 'rm -f -- "$t"; exit 129' HUP TERM INT`,
  `cat > "$t" || { rm -f -- "$t"; exit ${FILE_EXIT.noSpace}; }`,
  'if [ -e "$p" ]; then chmod --reference="$p" -- "$t" 2>/dev/null; else chmod 644 -- "$t"; fi',
  `mv -f -- "$t" "$p" || { rm -f -- "$t"; exit ${FILE_EXIT.forbidden}; }`,
].join('\n');
