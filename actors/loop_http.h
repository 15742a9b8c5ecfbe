/* What http/ asks of the loop: the loop's one ops table (http/conn.h,
 * m0__http_ops), given to m0__http_init on the loop's thread. */
#ifndef M0_ACTORS_LOOP_HTTP_H
#define M0_ACTORS_LOOP_HTTP_H

#include "http/conn.h"

extern const m0__http_ops m0__loop_http_ops;

#endif
