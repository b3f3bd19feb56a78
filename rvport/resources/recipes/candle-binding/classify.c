/* rvport's classifier driver for candle-binding's static library: loads a ModernBERT sequence classifier
 * through the library's C entry points, as the router's Go package does, and classifies each line of
 * MODEL/texts.txt.
 *
 *   candle-classify MODEL                       one line per text: class, confidence, each probability
 *   candle-classify MODEL REFERENCE [REPORT]    the same, then each result compared with REFERENCE's line
 *                                               (the output of another build): the same class, and the
 *                                               confidence and every probability within TOLERANCE; REPORT
 *                                               gets the comparison as one check of an rvport smoke report
 *
 * Exit status: 0 ok, 1 a result differs from the reference, 2 usage or unreadable input, 3 the library
 * failed (the model did not load, a text was not classified). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXTS 64
#define MAX_TEXT 1024
#define MAX_CLASSES 16
#define TOLERANCE 1e-3

typedef struct {
    int predicted_class;
    float confidence;
    float *probabilities;
    int num_classes;
} ModernBertClassificationResultWithProbs;

extern bool init_modernbert_classifier(const char *model_id, bool use_cpu);
extern ModernBertClassificationResultWithProbs classify_modernbert_text_with_probabilities(const char *text);
extern void free_modernbert_probabilities(float *probabilities, int num_classes);

typedef struct {
    int cls;
    int n;
    double confidence;
    double p[MAX_CLASSES];
} Result;

static int read_texts(const char *model, char texts[][MAX_TEXT]) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/texts.txt", model) >= (int)sizeof path) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < MAX_TEXTS && fgets(texts[n], MAX_TEXT, f)) {
        size_t len = strlen(texts[n]);
        if (len == 0 || texts[n][len - 1] != '\n') { fclose(f); return -1; } /* a line too long */
        texts[n][len - 1] = '\0';
        n++;
    }
    bool more = !feof(f) && fgetc(f) != EOF;
    fclose(f);
    return more || n == 0 ? -1 : n;
}

static int read_reference(const char *path, Result *ref, int want) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    for (; n < want; n++) {
        if (fscanf(f, "%d %lf %d", &ref[n].cls, &ref[n].confidence, &ref[n].n) != 3) break;
        if (ref[n].n < 1 || ref[n].n > MAX_CLASSES) break;
        int k = 0;
        while (k < ref[n].n && fscanf(f, "%lf", &ref[n].p[k]) == 1) k++;
        if (k != ref[n].n) break;
    }
    int extra = 0;
    if (n == want && fscanf(f, " %d", &extra) == 1) n = -1; /* more lines than texts */
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    static char texts[MAX_TEXTS][MAX_TEXT];
    static Result got[MAX_TEXTS], ref[MAX_TEXTS];
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: candle-classify MODEL [REFERENCE [REPORT]]\n");
        return 2;
    }
    int n = read_texts(argv[1], texts);
    if (n < 0) {
        fprintf(stderr, "candle-classify: %s/texts.txt: missing, empty, over %d lines or a line over %d bytes\n",
                argv[1], MAX_TEXTS, MAX_TEXT - 2);
        return 2;
    }
    if (!init_modernbert_classifier(argv[1], true)) {
        fprintf(stderr, "candle-classify: the classifier in %s did not load\n", argv[1]);
        return 3;
    }
    for (int i = 0; i < n; i++) {
        ModernBertClassificationResultWithProbs r = classify_modernbert_text_with_probabilities(texts[i]);
        if (r.predicted_class < 0 || r.num_classes < 1 || r.num_classes > MAX_CLASSES || !r.probabilities) {
            fprintf(stderr, "candle-classify: text %d (\"%s\") was not classified\n", i + 1, texts[i]);
            return 3;
        }
        got[i].cls = r.predicted_class;
        got[i].confidence = r.confidence;
        got[i].n = r.num_classes;
        printf("%d %.9g %d", r.predicted_class, (double)r.confidence, r.num_classes);
        for (int k = 0; k < r.num_classes; k++) {
            got[i].p[k] = r.probabilities[k];
            printf(" %.9g", (double)r.probabilities[k]);
        }
        printf("\n");
        free_modernbert_probabilities(r.probabilities, r.num_classes);
    }
    fflush(stdout);
    if (argc < 3) return 0;

    if (read_reference(argv[2], ref, n) != n) {
        fprintf(stderr, "candle-classify: %s does not hold exactly %d results\n", argv[2], n);
        return 2;
    }
    double max_conf = 0, max_prob = 0;
    int label_diffs = 0, over = 0;
    for (int i = 0; i < n; i++) {
        double dc = fabs(got[i].confidence - ref[i].confidence);
        bool same = got[i].cls == ref[i].cls && got[i].n == ref[i].n;
        if (dc > max_conf) max_conf = dc;
        for (int k = 0; same && k < got[i].n; k++) {
            double dp = fabs(got[i].p[k] - ref[i].p[k]);
            if (dp > max_prob) max_prob = dp;
            if (dp > TOLERANCE) over++;
        }
        if (dc > TOLERANCE) over++;
        if (!same) label_diffs++;
        if (!same || dc > TOLERANCE)
            fprintf(stderr, "candle-classify: text %d (\"%s\"): class %d confidence %.9g here, class %d "
                    "confidence %.9g in the reference\n", i + 1, texts[i], got[i].cls, got[i].confidence,
                    ref[i].cls, ref[i].confidence);
    }
    bool ok = label_diffs == 0 && over == 0;
    printf("parity %s: %d texts, %d labels differ, max confidence difference %.3g, max probability "
           "difference %.3g (tolerance %g)\n", ok ? "passed" : "failed", n, label_diffs, max_conf, max_prob,
           TOLERANCE);
    if (argc == 4) { /* rvport's smoke report (RVPORT_SMOKE_REPORT): this comparison as one check */
        const char *cpu = getenv("QEMU_CPU");
        if (!cpu || strlen(cpu) > 200 || strspn(cpu, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                     "0123456789_.,=-") != strlen(cpu))
            cpu = "";
        FILE *f = fopen(argv[3], "w");
        if (!f) {
            fprintf(stderr, "candle-classify: cannot write %s\n", argv[3]);
            return 2;
        }
        fprintf(f, "{\"checks\": [{\"name\": \"classifier parity with x86-64\", \"passed\": %s, "
                "\"figures\": {\"texts\": %d, \"labels_differ\": %d, \"max_confidence_difference\": %.9g, "
                "\"max_probability_difference\": %.9g, \"tolerance\": %g, \"qemu_cpu\": \"%s\"}}]}\n",
                ok ? "true" : "false", n, label_diffs, max_conf, max_prob, TOLERANCE, cpu);
        if (fclose(f) != 0) return 2;
    }
    return ok ? 0 : 1;
}
