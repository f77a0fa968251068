#include "core/base/thread_name.h"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace backfill {

void NameThisThread(const std::string& name) {
#if defined(__linux__)
  // Linux refuses names of 16 bytes or more: keep the first 15.
  const std::string kept = name.substr(0, 15);
  pthread_setname_np(pthread_self(), kept.c_str());
#else
  (void)name;
#endif
}

}  // namespace backfill
