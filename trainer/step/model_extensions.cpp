#include "trainer/step/model_extensions.h"

#include "base/check.h"
#include "trainer/step/trainable_model.h"

namespace gpt {

ModelExtensions& require_extensions(TrainableModel& model, std::string_view feature) {
  ModelExtensions* extensions = model.extensions();
  GPT_CHECK(extensions != nullptr, model.description(), ": this model has no ", feature);
  return *extensions;
}

NgramTable* ngram_table_of(TrainableModel& model) {
  ModelExtensions* extensions = model.extensions();
  return extensions != nullptr ? extensions->ngram_table() : nullptr;
}

bool uses_prefix_table(TrainableModel& model) {
  ModelExtensions* extensions = model.extensions();
  return extensions != nullptr && extensions->uses_prefix_table();
}

}  // namespace gpt
