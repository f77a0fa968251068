// NameThisThread: gives the calling thread a name that `top -H`, `ps -L`,
// gdb and perf show (Linux keeps the first 15 bytes), so that an operator
// can tell the daemon's workers, its task writer and its checkpointers
// apart. Does nothing where the platform has no thread names.
// Thread-safe: it names only the calling thread.

#ifndef BACKFILL_CORE_BASE_THREAD_NAME_H_
#define BACKFILL_CORE_BASE_THREAD_NAME_H_

#include <string>

namespace backfill {

void NameThisThread(const std::string& name);

}  // namespace backfill

#endif  // BACKFILL_CORE_BASE_THREAD_NAME_H_
