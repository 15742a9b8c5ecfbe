/* Values from outside (a variable, a flag, the topology file, a channel
 * name) put into a line on stderr: every line m0 writes is one line, so a
 * value with a line break or another control byte must not end it early
 * and write a forged "m0: ..." line after it (OWASP: encode output for its
 * context). A value that holds one is refused where it is read (every
 * variable and flag: config/options.c; every string of the topology file:
 * config/topofile.c), and the refusal shows it escaped; so no later line
 * can carry one. */
#ifndef M0_BASE_TEXT_H
#define M0_BASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s holds a control byte (below 0x20, or 0x7f). */
bool m0__has_control(const char *s);
/* Writes s into out (n > 0; always terminated, cut short when out is full)
 * with each control byte written \n, \r, \t or \xHH and each backslash \\:
 * one line, whatever s holds. Returns out. */
char *m0__escape(char *out, size_t n, const char *s);

#endif
