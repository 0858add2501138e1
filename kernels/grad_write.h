#pragma once
// How a backward op stores a gradient: added to what the output holds (the convention: a value read in several
// places collects its gradient by accumulation), or written over it by the gradient's first writer. Overwriting
// gives the bits adding into zeros would give (up to the sign of a zero) without the zero fill and its read-back;
// trainer/model/tape.h's Var::grad_for_overwrite says when a writer is the first.
#include <cstdint>

namespace gpt {

enum class GradWrite : uint8_t { add, overwrite };

}  // namespace gpt
