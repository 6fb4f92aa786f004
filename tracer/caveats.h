/*
 * What tracing itself changes in a program, said before it starts where it
 * can be seen in advance. ptrace takes set-user-ID, set-group-ID and file
 * capabilities away from a program traced by a user who is not root; a
 * program that checks for a debugger sees ptfil; a program's own seccomp
 * SECCOMP_RET_TRACE rules stop at ptfil. Only the first can be known from
 * the program's file: README.md ("What tracing itself changes") tells the
 * rest.
 */
#ifndef PTFIL_CAVEATS_H
#define PTFIL_CAVEATS_H

/*
 * Finds program as execvp(3) would (through PATH when it has no slash) and,
 * when ptfil is not root and the file is set-user-ID or set-group-ID to
 * someone else, or has file capabilities, prints one warning that it will
 * run without that privilege. Prints nothing when the file cannot be found:
 * launch reports that itself.
 */
void caveats_warn_launch(const char *program);

#endif
