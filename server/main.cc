// backfilld: the backfill daemon (server/daemon_main.h says what it does).

#include "server/daemon_main.h"

int main(int argc, char** argv) { return backfill::DaemonMain(argc, argv); }
