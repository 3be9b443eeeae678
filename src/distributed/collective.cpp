// Errors agreed on by every rank (see collective.h).
#include "distributed/collective.h"

#include <fmt/format.h>

#include <exception>
#include <vector>

#include "fieldflow/errors.h"

namespace fieldflow::distributed::detail {

namespace {

// The error kinds a check may raise, in a fixed order shared by every rank.
enum class Kind : int {
  dimension, dtype, program, argument, domain, connectivity, layout, option, compile, cache, storage,
  workspace, allocation, concurrency, internal, other
};

Kind kind_of(const std::exception& e) {
  if (dynamic_cast<const DimensionError*>(&e)) return Kind::dimension;
  if (dynamic_cast<const DTypeError*>(&e)) return Kind::dtype;
  if (dynamic_cast<const ProgramError*>(&e)) return Kind::program;
  if (dynamic_cast<const ArgumentError*>(&e)) return Kind::argument;
  if (dynamic_cast<const DomainError*>(&e)) return Kind::domain;
  if (dynamic_cast<const ConnectivityError*>(&e)) return Kind::connectivity;
  if (dynamic_cast<const LayoutError*>(&e)) return Kind::layout;
  if (dynamic_cast<const OptionError*>(&e)) return Kind::option;
  if (dynamic_cast<const CompileError*>(&e)) return Kind::compile;
  if (dynamic_cast<const CacheError*>(&e)) return Kind::cache;
  if (dynamic_cast<const StorageError*>(&e)) return Kind::storage;
  if (dynamic_cast<const WorkspaceError*>(&e)) return Kind::workspace;
  if (dynamic_cast<const AllocationError*>(&e)) return Kind::allocation;
  if (dynamic_cast<const ConcurrencyError*>(&e)) return Kind::concurrency;
  if (dynamic_cast<const InternalError*>(&e)) return Kind::internal;
  return Kind::other;
}

[[noreturn]] void throw_kind(Kind k, const std::string& m) {
  switch (k) {
    case Kind::dimension: throw DimensionError(m);
    case Kind::dtype: throw DTypeError(m);
    case Kind::program: throw ProgramError(m);
    case Kind::argument: throw ArgumentError(m);
    case Kind::domain: throw DomainError(m);
    case Kind::connectivity: throw ConnectivityError(m);
    case Kind::layout: throw LayoutError(m);
    case Kind::option: throw OptionError(m);
    case Kind::compile: throw CompileError(m);
    case Kind::cache: throw CacheError(m);
    case Kind::storage: throw StorageError(m);
    case Kind::workspace: throw WorkspaceError(m);
    case Kind::allocation: throw AllocationError(m);
    case Kind::concurrency: throw ConcurrencyError(m);
    case Kind::internal: throw InternalError(m);
    case Kind::other: break;
  }
  throw Error(m);
}

}  // namespace

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw InternalError(fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(length))));
}

void collectively(MPI_Comm comm, const std::function<void()>& check) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::exception_ptr failure;
  Kind kind = Kind::other;
  std::string message;
  try {
    check();
  } catch (const std::exception& e) {
    failure = std::current_exception();
    kind = kind_of(e);
    message = e.what();
  }
  int mine = failure ? rank : size, first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  int header[2] = {static_cast<int>(kind), static_cast<int>(message.size())};
  MPI_Bcast(header, 2, MPI_INT, first, comm);
  std::vector<char> text(static_cast<std::size_t>(header[1]));
  if (rank == first) text.assign(message.begin(), message.end());
  MPI_Bcast(text.data(), header[1], MPI_CHAR, first, comm);
  if (rank == first) std::rethrow_exception(failure);
  throw_kind(static_cast<Kind>(header[0]), fmt::format("rank {}: {}", first, std::string(text.begin(), text.end())));
}

void require_same_on_all_ranks(MPI_Comm comm, const std::string& text, const std::string& what) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  std::vector<char> root(static_cast<std::size_t>(length));
  if (rank == 0) root.assign(text.begin(), text.end());
  MPI_Bcast(root.data(), length, MPI_CHAR, 0, comm);
  const std::string expected(root.begin(), root.end());
  collectively(comm, [&] {
    if (text != expected)
      throw ArgumentError(fmt::format("{} differs between ranks: rank 0 has {}, rank {} has {}", what, expected,
                                      rank, text));
  });
}

}  // namespace fieldflow::distributed::detail
