/** The command line is wrong: the message is printed before the usage text, and the exit code is `usage`. */
export class UsageError extends Error {}
