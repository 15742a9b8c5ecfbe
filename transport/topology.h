/* The topology: which actors exist and the URL of each, built from one
 * description. This is the only code that spells a scheme: the mode's
 * transport (inproc:// for one process, ipc:// in the run directory for
 * processes on one machine), a topology file's URLs in place of the built
 * ones, and the outside address of each loop that other programs on this
 * machine dial (m0pub). tcp:// URLs come only from a file and change the
 * socket type alone: the actors are still spawned here (ARCHITECTURE.md). */
#ifndef M0_TRANSPORT_TOPOLOGY_H
#define M0_TRANSPORT_TOPOLOGY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/ids.h"

typedef enum m0__mode { M0__MODE_SINGLE, M0__MODE_THREADS, M0__MODE_PREFORK } m0__mode;
typedef enum m0__scheme { M0__SCHEME_INPROC, M0__SCHEME_IPC, M0__SCHEME_TCP } m0__scheme;

typedef struct m0__actor_desc {
  uint32_t id;
  char name[32];
  char url[M0__URL_MAX];
} m0__actor_desc;

typedef struct m0__topology {
  m0__mode mode;
  m0__scheme scheme;
  int loops;
  int pool; /* handler threads behind each loop */
  int nactors;
  m0__actor_desc *actors; /* coordinator, producer, (prefork: workers), loops, then pool threads */
} m0__topology;

/* The scheme a host in `mode` uses: the topology file's transport when it
 * names one ("inproc", "ipc", "tcp"), else inproc for one process and ipc
 * under prefork. */
m0__scheme m0__topology_scheme(m0__mode mode, const char *file_transport);
/* A host's whole topology: built for the mode's scheme (ipc in run_dir,
 * inproc in the host's namespace ns, e.g. m0-<pid>.<host>: two hosts of
 * one process do not meet; NULL: m0-<pid>), then the file's URLs in place of the
 * built ones when it gave one per actor (<pid> and <run-dir> filled in).
 * Returns 0 or an m0__err. */
int m0__topology_make(m0__topology *t, m0__mode mode, int loops, int pool, const char *file_transport,
                      const char (*file_urls)[256], int nfile, const char *run_dir, const char *ns);
/* The same as a description (the doctor): <pid> left as a placeholder, and
 * <run-dir> too when run_dir is NULL; the file's URLs as the file wrote them. */
int m0__topology_describe(m0__topology *t, m0__mode mode, int loops, int pool, const char *file_transport,
                          const char (*file_urls)[256], int nfile, const char *run_dir);
/* The address outside publishers on this machine dial for loop i: its
 * socket in the run directory (its mailbox under prefork, a second listener
 * otherwise). 0, or M0__ETOOBIG. */
int m0__topology_outside_url(char *out, size_t n, const char *run_dir, int loop);
/* Where the host listens for the instances of application actor `name`
 * (placed process or external): the file's URL with <pid> and <run-dir>
 * filled in, else ipc://<run-dir>/actor.<name>.sock (run_dir NULL keeps the
 * placeholder, for the doctor). 0, or M0__ETOOBIG. */
int m0__topology_app_url(char *out, size_t n, const char *file_url, const char *run_dir, const char *name);
/* Under --workers, where worker `worker` listens for the relay's legs of
 * such an actor (service/relay.h): ipc://<run-dir>/actor.<name>.w<worker>.sock. */
int m0__topology_door_url(char *out, size_t n, const char *run_dir, const char *name, int worker);
/* The mailbox of instance k of an actor placed on a thread (inproc, in the
 * host's namespace ns: the loops reach it through its direct inbox). */
int m0__topology_instance_url(char *out, size_t n, const char *ns, const char *name, int k);
/* Builds the actors and their URLs. `where` is the inproc namespace (inproc),
 * the run directory (ipc) or "host:firstport" (tcp). Returns 0 or an m0__err. */
int m0__topology_build(m0__topology *t, m0__mode mode, int loops, int pool, m0__scheme scheme,
                       const char *where);
void m0__topology_free(m0__topology *t);
/* Takes a topology file's URLs (in actor order), filling in <pid> and
 * <run-dir>. Returns 0, or M0__ETOOBIG when a filled URL is too long. */
int m0__topology_use_urls(m0__topology *t, m0__scheme scheme, const char (*urls)[256], int n, const char *run_dir);
/* "inproc", "ipc", "tcp" to a scheme; -1 for anything else. */
int m0__scheme_parse(const char *name);
const m0__actor_desc *m0__topology_find(const m0__topology *t, uint32_t id);
const char *m0__mode_name(m0__mode m);
const char *m0__scheme_name(m0__scheme s);
/* Whether s is an address in one of the schemes m0 speaks (inproc://,
 * ipc://, tcp://), and why nng could not dial it (NULL: it can). */
bool m0__url_is_nng(const char *s);
const char *m0__url_undialable(const char *url);

/* A URL's scheme, for code outside transport/ that must judge or name one
 * (a topology file's checks): the schemes are spelled here alone. */
typedef enum m0__url_kind { M0__URL_OTHER, M0__URL_INPROC, M0__URL_IPC, M0__URL_TCP, M0__URL_TLS_TCP } m0__url_kind;
m0__url_kind m0__url_kind_of(const char *url);
/* "inproc://", "ipc://", "tcp://", "tls+tcp://" ("" for M0__URL_OTHER). */
const char *m0__url_prefix(m0__url_kind k);
/* Whether url (non-NULL) is in the transport a topology file names
 * ("inproc", "ipc", "tcp", "tls+tcp"): it begins "<transport>://". */
bool m0__url_in_transport(const char *url, const char *transport);
/* Whether a tcp:// URL's host is this machine's loopback: 127.0.0.0/8,
 * ::1 (or an IPv4-mapped 127.x) or localhost. */
bool m0__url_loopback(const char *url);

#endif
