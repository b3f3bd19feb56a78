/*
 * rvport: a stand-in for candle-binding's native library (libcandle_semantic_router) on riscv64, where
 * that Rust library is not built. Written for rvport; not part of semantic-router.
 *
 * At v0.3.0 the router's own package pkg/classification (not only candle-binding) calls six of the
 * library's C functions whenever cgo is on, whatever the architecture, and asks the linker for
 * -lcandle_semantic_router. The recipe builds this file into that archive. Both initialisers report
 * failure, so the router says its unified classifier cannot start, as it does when a model is missing;
 * the other four are reached only after an initialiser succeeded, so they abort.
 */
#include <stdbool.h>
#include <stdlib.h>

bool init_unified_classifier_c(const char *modernbert_path, const char *intent_head_path,
                               const char *pii_head_path, const char *security_head_path,
                               const char **intent_labels, int intent_labels_count,
                               const char **pii_labels, int pii_labels_count,
                               const char **security_labels, int security_labels_count, bool use_cpu)
{
    return false;
}

bool init_lora_unified_classifier(const char *intent_model_path, const char *pii_model_path,
                                  const char *security_model_path, const char *architecture, bool use_cpu)
{
    return false;
}

/* never reached: their results are structures this file does not declare, so no call returns */
void classify_unified_batch(void) { abort(); }
void free_unified_batch_result(void) { abort(); }
void classify_batch_with_lora(void) { abort(); }
void free_lora_batch_result(void) { abort(); }
