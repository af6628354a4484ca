// The plan format's version, which the compiler writes and the runtime requires: a plan of
// another version is refused (recompiled), never read with fields it lacks.
#ifndef MT_PLAN_PLANFORMAT_H
#define MT_PLAN_PLANFORMAT_H

#include <cstdint>

namespace mt {

/// 2: each parameter carries its layer (Parameter.layer).
constexpr uint32_t kPlanFormatVersion = 2;

} // namespace mt

#endif // MT_PLAN_PLANFORMAT_H
