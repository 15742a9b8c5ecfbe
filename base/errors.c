#include "base/errors.h"

const char *m0__strerror(int err) {
  switch (err) {
  case M0__OK: return "ok";
#define M0__ERR_CASE(name, text) case M0__E##name: return text;
    M0__ERRORS(M0__ERR_CASE)
#undef M0__ERR_CASE
  default: return "unknown error";
  }
}

int m0__exit_code(int err) {
  if (err == 0) return 0;
  return err == M0__EMAKE || err == M0__ECONFIG ? 78 : 1;
}
