#pragma once
// Errors that every rank agrees on. A check that fails on one rank only must not leave the others
// waiting in a message that never comes: `collectively` runs a check on every rank and, if it
// threw anywhere, throws on every rank an error of the same kind (the failing rank its own).
#include <mpi.h>

#include <functional>
#include <string>

namespace fieldflow::distributed::detail {

// Runs `check`; collective over `comm`. The lowest failing rank's error wins: that rank rethrows
// it unchanged, the others throw the same fieldflow::Error subclass with "rank R: <message>".
void collectively(MPI_Comm comm, const std::function<void()>& check);

// Throws ArgumentError on every rank unless `text` is the same on all ranks; `what` names the
// thing compared, for the message (which quotes rank 0's text and the first rank that differs).
void require_same_on_all_ranks(MPI_Comm comm, const std::string& text, const std::string& what);

// Throws MPI failures as InternalError naming the call (MPI's default handler would abort).
void check_mpi(int code, const char* call);

}  // namespace fieldflow::distributed::detail
