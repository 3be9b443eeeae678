#include "passes/build_kernels.h"

namespace fieldflow::passes {

namespace {
const ir::Expr* strip_labels(const ir::Expr* e) {
  while (e->kind == ir::ExprKind::named && !e->materialize) e = e->args[0].get();
  return e;
}
}  // namespace

void build_kernels(ir::Schedule& s) {
  for (std::size_t i = 0; i < s.program.stmts.size(); ++i) {
    const ir::Stmt& st = s.program.stmts[i];
    ir::Kernel k;
    k.name = st.op;
    k.stmt = static_cast<int>(i);
    k.domain = st.domain;
    k.outputs = st.outputs;
    k.value = st.expr;
    // A scan written straight to the outputs needs no transient: the kernel sweeps into them.
    const ir::Expr* core = strip_labels(st.expr.get());
    if (core->kind == ir::ExprKind::scan) {
      k.kind = ir::KernelKind::scan;
      for (const auto& p : std::vector<ir::ExprPtr>{st.expr})
        for (const ir::Expr* e = p.get(); e->kind == ir::ExprKind::named; e = e->args[0].get())
          k.value = e->args[0];
    }
    s.kernels.push_back(std::move(k));
  }
}

}  // namespace fieldflow::passes
