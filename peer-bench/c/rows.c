/* StarPU's side of the single-node peer bench (src/bin/rows.rs), as a StarPU user writes it:
 *
 * - The row pipeline: every row of the input, of the FFT's output and of the product is its
 *   own vector handle; a frame inserts one task per row per stage (FFT: R input row, W middle
 *   row; multiply: R middle row, R the filter, W output row) and waits for all of them.
 * - The 3-argument task: three one-element vectors, and `tasks` insertions of an empty codelet
 *   on them (R, R, W), then one wait.
 *
 * The kernels are Rust's (the same functions the plain loop calls), reached through the
 * function pointers of `struct rows_kernels`, handed to every task as its argument without a
 * copy (STARPU_CL_ARGS_NFREE), so that only the runtimes' overhead differs. */
#include <starpu.h>
#include <stdlib.h>

typedef struct {
    float re, im;
} c32;

/* Mirrors `RowKernels` in rows.rs. */
struct rows_kernels {
    void (*fft)(const void *plan, const c32 *in, c32 *out, unsigned n);
    void (*mul)(const c32 *a, const c32 *b, c32 *out, unsigned n);
    const void *plan;
};

static void fft_cpu(void *buffers[], void *arg) {
    const struct rows_kernels *k = arg;
    k->fft(k->plan, (const c32 *)STARPU_VECTOR_GET_PTR(buffers[0]),
           (c32 *)STARPU_VECTOR_GET_PTR(buffers[1]), STARPU_VECTOR_GET_NX(buffers[0]));
}

static void mul_cpu(void *buffers[], void *arg) {
    const struct rows_kernels *k = arg;
    k->mul((const c32 *)STARPU_VECTOR_GET_PTR(buffers[0]),
           (const c32 *)STARPU_VECTOR_GET_PTR(buffers[1]),
           (c32 *)STARPU_VECTOR_GET_PTR(buffers[2]), STARPU_VECTOR_GET_NX(buffers[0]));
}

static void empty_cpu(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
}

static struct starpu_codelet fft_cl = {
    .cpu_funcs = {fft_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W}, .name = "fft"};
static struct starpu_codelet mul_cl = {
    .cpu_funcs = {mul_cpu}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_W},
    .name = "mul"};
static struct starpu_codelet wake_cl = {.cpu_funcs = {empty_cpu}, .nbuffers = 0, .name = "wake"};
static struct starpu_codelet empty_cl = {
    .cpu_funcs = {empty_cpu}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_W},
    .name = "empty"};

/* Starts StarPU with the environment's settings (STARPU_HOME, STARPU_NCPU, ...): the number
 * of workers, or -1 where it does not start. */
int rows_starpu_init(void) {
    if (starpu_init(NULL) != 0) return -1;
    return (int)starpu_worker_get_count();
}

void rows_starpu_shutdown(void) { starpu_shutdown(); }

/* Resumes the paused workers and returns once one has run a task: starpu_resume only signals
 * them, and a woken thread may wait milliseconds for a core on a loaded machine, which would
 * otherwise count in the next measurement. */
int rows_starpu_resume(void) {
    starpu_resume();
    int err = starpu_task_insert(&wake_cl, 0);
    starpu_task_wait_for_all();
    return err;
}

/* Whether this StarPU was built with idle workers that poll instead of sleeping. */
int rows_starpu_workers_spin(void) {
#ifdef STARPU_NON_BLOCKING_DRIVERS
    return 1;
#else
    return 0;
#endif
}

struct rows_pipeline {
    int rows;
    const struct rows_kernels *kernels;
    starpu_data_handle_t filter, *in, *mid, *out;
};

static starpu_data_handle_t *register_rows(c32 *m, int rows, int cols) {
    starpu_data_handle_t *h = malloc(sizeof(*h) * rows);
    if (!h) return NULL;
    for (int r = 0; r < rows; r++)
        starpu_vector_data_register(&h[r], STARPU_MAIN_RAM, (uintptr_t)(m + (size_t)r * cols),
                                    cols, sizeof(c32));
    return h;
}

static void unregister_rows(starpu_data_handle_t *h, int rows) {
    if (!h) return;
    for (int r = 0; r < rows; r++) starpu_data_unregister(h[r]);
    free(h);
}

/* Registers the three (rows x cols) matrices row by row and the filter row; NULL where memory
 * runs out. The memory stays the caller's, and StarPU's until rows_pipeline_free. */
void rows_pipeline_free(struct rows_pipeline *p);

struct rows_pipeline *rows_pipeline_new(c32 *in, c32 *mid, c32 *out, c32 *filter, int rows,
                                        int cols, const struct rows_kernels *kernels) {
    struct rows_pipeline *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->rows = rows;
    p->kernels = kernels;
    starpu_vector_data_register(&p->filter, STARPU_MAIN_RAM, (uintptr_t)filter, cols,
                                sizeof(c32));
    p->in = register_rows(in, rows, cols);
    p->mid = register_rows(mid, rows, cols);
    p->out = register_rows(out, rows, cols);
    if (!p->in || !p->mid || !p->out) {
        rows_pipeline_free(p);
        return NULL;
    }
    return p;
}

/* One frame: every row's FFT, every row's product, then a wait for all. Returns the first
 * error starpu_task_insert gave, or 0. */
int rows_pipeline_frame(struct rows_pipeline *p) {
    int err = 0;
    void *arg = (void *)p->kernels;
    for (int r = 0; r < p->rows && !err; r++)
        err = starpu_task_insert(&fft_cl, STARPU_CL_ARGS_NFREE, arg, sizeof(*p->kernels),
                                 STARPU_R, p->in[r], STARPU_W, p->mid[r], 0);
    for (int r = 0; r < p->rows && !err; r++)
        err = starpu_task_insert(&mul_cl, STARPU_CL_ARGS_NFREE, arg, sizeof(*p->kernels),
                                 STARPU_R, p->mid[r], STARPU_R, p->filter, STARPU_W, p->out[r],
                                 0);
    starpu_task_wait_for_all();
    return err;
}

/* Unregisters everything, which brings the data home: the caller may read it again. */
void rows_pipeline_free(struct rows_pipeline *p) {
    if (!p) return;
    unregister_rows(p->in, p->rows);
    unregister_rows(p->mid, p->rows);
    unregister_rows(p->out, p->rows);
    starpu_data_unregister(p->filter);
    free(p);
}

struct rows_args3 {
    c32 value[3];
    starpu_data_handle_t h[3];
};

struct rows_args3 *rows_args3_new(void) {
    struct rows_args3 *a = calloc(1, sizeof(*a));
    if (!a) return NULL;
    for (int i = 0; i < 3; i++)
        starpu_vector_data_register(&a->h[i], STARPU_MAIN_RAM, (uintptr_t)&a->value[i], 1,
                                    sizeof(c32));
    return a;
}

/* `tasks` empty tasks on (R, R, W), then a wait for all: the first insertion error, or 0. */
int rows_args3_run(struct rows_args3 *a, int tasks) {
    int err = 0;
    for (int t = 0; t < tasks && !err; t++)
        err = starpu_task_insert(&empty_cl, STARPU_R, a->h[0], STARPU_R, a->h[1], STARPU_W,
                                 a->h[2], 0);
    starpu_task_wait_for_all();
    return err;
}

void rows_args3_free(struct rows_args3 *a) {
    if (!a) return;
    for (int i = 0; i < 3; i++) starpu_data_unregister(a->h[i]);
    free(a);
}
