// Placeholder translation unit until the harness library has sources.
namespace gpt::harness {}
