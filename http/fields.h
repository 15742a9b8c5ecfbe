/* Header fields an application (or an actor's reply) hands the host: the one
 * list of what a field name and value may be, and of the names that are the
 * host's to write. m0_response_header, m0_reply_header, m0_deferred_header
 * and the wire's reply decoder all ask here, so a header refused by one is
 * refused by every way in. */
#ifndef M0_HTTP_FIELDS_H
#define M0_HTTP_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#define M0__FIELD_NAME_MAX 256
#define M0__FIELD_VALUE_MAX 8192

/* Why a field is refused, or M0__FIELD_OK. */
typedef enum m0__field_verdict {
  M0__FIELD_OK = 0,
  M0__FIELD_BAD_NAME,  /* empty, too long, or not an RFC 9110 token */
  M0__FIELD_BAD_VALUE, /* too long, or a control byte other than HTAB (a CR or LF would split the head) */
  M0__FIELD_HOSTS,     /* framing and the host's own: Content-Length, Transfer-Encoding, Connection, ... */
} m0__field_verdict;

/* Checks a field as given. value is checked as it stands: trim it first
 * (m0__field_trim) where the API promises to. */
m0__field_verdict m0__field_check(const char *name, size_t nn, const char *value, size_t vn);
/* Whether a value may go out as it is (no control byte but HTAB, at most
 * M0__FIELD_VALUE_MAX bytes). */
bool m0__field_value_ok(const char *value, size_t vn);
/* Whether name (case-insensitive) is one the host writes itself. */
bool m0__field_is_hosts(const char *name, size_t nn);
/* Drops leading and trailing SP and HTAB (RFC 9110 section 5.5: a field value
 * has none). */
void m0__field_trim(const char **value, size_t *vn);
/* Whether a comma-separated value (Connection, Upgrade, Accept) holds token,
 * case-insensitive; an element's parameters (";q=0.9") are not compared. */
bool m0__field_has(const char *value, size_t vn, const char *token);

#endif
