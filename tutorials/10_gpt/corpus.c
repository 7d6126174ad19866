/* The text as token ids: one token per distinct byte, the vocabulary sorted (nanoGPT's
 * shakespeare_char prepare.py: sorted(set(text))). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tutorials/10_gpt/gpt.h"
#include "tutorials/common/common.h"

/* The files of /usr/share/games/fortunes read for a folder, lesson 09's (about 400 KB). */
static const char *const fortune_files[] = {"wisdom", "literature", "science", "people"};

/* --synthetic: uniform ids, so the loss cannot go below log(96) = 4.56; the smoke
 * tests and the timing need no corpus. Shown as ' '..'~' and '\n'. */
static gpt_corpus synthetic_corpus(void) {
    gpt_corpus c = {.length = 65536, .vocab = 96, .name = "uniform token ids (--synthetic)"};
    c.ids = malloc((size_t)c.length * sizeof *c.ids);
    TG_SCOPE {
        tg_tensor *ids = tg_randint(0, c.vocab, TG_SHAPE(c.length), (tg_opts){0});
        tg_copy_to_host(ids, c.ids, (size_t)c.length * sizeof *c.ids);
    }
    for (int i = 0; i < 95; i++) c.chars[i] = (unsigned char)(' ' + i);
    c.chars[95] = '\n';
    return c;
}

gpt_corpus gpt_corpus_load(const char *path, bool synthetic) {
    if (synthetic) return synthetic_corpus();
    unsigned char *text = NULL;
    int64_t length = 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char file[4096];
        for (size_t i = 0; i < sizeof fortune_files / sizeof fortune_files[0]; i++) {
            snprintf(file, sizeof file, "%s/%s", path, fortune_files[i]);
            tut_append_file(&text, &length, file);
        }
    } else {
        tut_append_file(&text, &length, path);
    }
    gpt_corpus c = {.ids = malloc((size_t)length * sizeof(int64_t)), .length = length, .name = path};
    int index_of[256];
    bool seen[256] = {0};
    for (int64_t i = 0; i < length; i++) seen[text[i]] = true;
    for (int b = 0; b < 256; b++)
        if (seen[b]) {
            index_of[b] = c.vocab;
            c.chars[c.vocab++] = (unsigned char)b;
        }
    for (int64_t i = 0; i < length; i++) c.ids[i] = index_of[text[i]];
    free(text);
    return c;
}

void gpt_corpus_free(gpt_corpus *c) {
    free(c->ids);
    c->ids = NULL;
}
