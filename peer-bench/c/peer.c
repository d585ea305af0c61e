/* The peers of RIMMS's distributed corner turn, as a user of each would write them:
 *
 * - StarPU-MPI: the matrix registered as B x B blocks, each owned by the rank owning its
 *   row block; the corner turn is one task per block (dst(j,i) = src(i,j)^T), inserted on
 *   every rank with starpu_mpi_task_insert, run where its output lives (owner computes), its
 *   input sent by StarPU-MPI. The pipeline adds a window on every row before and |x|^2 after,
 *   one task per block each.
 * - Bare MPI: the same corner turn by hand: a transpose into one block per destination,
 *   MPI_Ialltoall, the blocks copied into the rows of the transpose; and the all-to-all alone.
 *
 * Every function runs one configuration as this rank of an mpirun job, repeats it `reps`
 * times after one untimed repetition, and returns the median milliseconds (the same on every
 * rank: each repetition is timed between barriers). One configuration per process: MPI and
 * StarPU are initialised once.
 */
#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float re, im;
} c32;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, n, sizeof(double), cmp_double);
    return t[n / 2];
}

static c32 value(int r, int c) {
    c32 v = {(float)r, (float)c};
    return v;
}

/* ---- StarPU-MPI ---- */

static void transpose_cpu(void *buffers[], void *arg) {
    (void)arg;
    const c32 *src = (const c32 *)STARPU_MATRIX_GET_PTR(buffers[0]);
    unsigned nx = STARPU_MATRIX_GET_NX(buffers[0]), ny = STARPU_MATRIX_GET_NY(buffers[0]);
    unsigned ld = STARPU_MATRIX_GET_LD(buffers[0]);
    c32 *dst = (c32 *)STARPU_MATRIX_GET_PTR(buffers[1]);
    unsigned dld = STARPU_MATRIX_GET_LD(buffers[1]);
    for (unsigned y = 0; y < ny; y++)
        for (unsigned x = 0; x < nx; x++) dst[x * dld + y] = src[y * ld + x];
}

static void window_cpu(void *buffers[], void *arg) {
    const c32 *w;
    starpu_codelet_unpack_args(arg, &w);
    c32 *m = (c32 *)STARPU_MATRIX_GET_PTR(buffers[0]);
    unsigned nx = STARPU_MATRIX_GET_NX(buffers[0]), ny = STARPU_MATRIX_GET_NY(buffers[0]);
    unsigned ld = STARPU_MATRIX_GET_LD(buffers[0]);
    for (unsigned y = 0; y < ny; y++)
        for (unsigned x = 0; x < nx; x++) {
            c32 a = m[y * ld + x], b = w[x];
            m[y * ld + x].re = a.re * b.re - a.im * b.im;
            m[y * ld + x].im = a.re * b.im + a.im * b.re;
        }
}

static void power_cpu(void *buffers[], void *arg) {
    (void)arg;
    c32 *m = (c32 *)STARPU_MATRIX_GET_PTR(buffers[0]);
    unsigned nx = STARPU_MATRIX_GET_NX(buffers[0]), ny = STARPU_MATRIX_GET_NY(buffers[0]);
    unsigned ld = STARPU_MATRIX_GET_LD(buffers[0]);
    for (unsigned y = 0; y < ny; y++)
        for (unsigned x = 0; x < nx; x++) {
            c32 a = m[y * ld + x];
            m[y * ld + x].re = a.re * a.re + a.im * a.im;
            m[y * ld + x].im = 0.0f;
        }
}

static struct starpu_codelet transpose_cl = {
    .cpu_funcs = {transpose_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W},
    .name = "transpose"};
static struct starpu_codelet window_cl = {
    .cpu_funcs = {window_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "window"};
static struct starpu_codelet power_cl = {
    .cpu_funcs = {power_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "power"};

/* The rank owning row block `i` of `b`: block rows, as RIMMS distributes them. */
static int owner(int i, int b, int ranks) { return (int)((long)i * ranks / b); }

/* A (rows x cols) matrix as b x b blocks; blocks this rank owns are allocated and filled
 * (with value(r, c) when `fill`), the others registered without memory. */
static starpu_data_handle_t *register_blocks(int rows, int cols, int b, int me, int ranks,
                                             int tag0, int fill, c32 **owned) {
    int br = rows / b, bc = cols / b;
    starpu_data_handle_t *h = malloc(sizeof(*h) * b * b);
    for (int i = 0; i < b; i++)
        for (int j = 0; j < b; j++) {
            int o = owner(i, b, ranks);
            if (o == me) {
                c32 *p = malloc(sizeof(c32) * br * bc);
                for (int y = 0; y < br; y++)
                    for (int x = 0; x < bc; x++)
                        p[y * bc + x] = fill ? value(i * br + y, j * bc + x) : (c32){0, 0};
                owned[i * b + j] = p;
                starpu_matrix_data_register(&h[i * b + j], STARPU_MAIN_RAM, (uintptr_t)p, bc, bc,
                                            br, sizeof(c32));
            } else {
                owned[i * b + j] = NULL;
                starpu_matrix_data_register(&h[i * b + j], -1, 0, bc, bc, br, sizeof(c32));
            }
            starpu_mpi_data_register(h[i * b + j], tag0 + i * b + j, o);
        }
    return h;
}

/* The corner turn, then window, corner turn, power, in StarPU-MPI with `b` x `b` blocks: the
 * medians in `turn` and `pipe` (ms). Returns the elements of the transpose that are wrong on
 * this rank's blocks, or -1 where StarPU-MPI does not start. */
int starpu_run(int rows, int cols, int b, int reps, double *turn, double *pipe) {
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    int argc = 0;
    char **argv = NULL;
    if (starpu_mpi_init_conf(&argc, &argv, 1, MPI_COMM_WORLD, &conf) != 0) return -1;
    int me, ranks;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    starpu_mpi_comm_size(MPI_COMM_WORLD, &ranks);
    c32 **src_mem = calloc(b * b, sizeof(c32 *)), **dst_mem = calloc(b * b, sizeof(c32 *));
    starpu_data_handle_t *src = register_blocks(rows, cols, b, me, ranks, 0, 1, src_mem);
    starpu_data_handle_t *dst = register_blocks(cols, rows, b, me, ranks, b * b, 0, dst_mem);
    c32 *w = malloc(sizeof(c32) * cols);
    for (int c = 0; c < cols; c++) w[c] = (c32){1.0f, 0.0f};
    double *t = malloc(sizeof(double) * (reps + 1));
    int wrong = 0;
    for (int pipeline = 0; pipeline <= 1; pipeline++) {
    for (int rep = 0; rep <= reps; rep++) {
        starpu_mpi_barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (pipeline)
            for (int i = 0; i < b; i++)
                for (int j = 0; j < b; j++) {
                    const c32 *seg = w + j * (cols / b);
                    starpu_mpi_task_insert(MPI_COMM_WORLD, &window_cl, STARPU_VALUE, &seg,
                                           sizeof(seg), STARPU_RW, src[i * b + j], 0);
                }
        for (int i = 0; i < b; i++)
            for (int j = 0; j < b; j++)
                starpu_mpi_task_insert(MPI_COMM_WORLD, &transpose_cl, STARPU_R, src[i * b + j],
                                       STARPU_W, dst[j * b + i], 0);
        if (pipeline)
            for (int i = 0; i < b; i++)
                for (int j = 0; j < b; j++)
                    starpu_mpi_task_insert(MPI_COMM_WORLD, &power_cl, STARPU_RW, dst[i * b + j],
                                           0);
        starpu_task_wait_for_all();
        starpu_mpi_wait_for_all(MPI_COMM_WORLD);
        starpu_mpi_barrier(MPI_COMM_WORLD);
        t[rep] = (MPI_Wtime() - t0) * 1e3;
        /* Received copies would stay cached: the next repetition must send again. */
        starpu_mpi_cache_flush_all_data(MPI_COMM_WORLD);
    }
    if (pipeline) {
        *pipe = median(t + 1, reps);
        continue;
    }
    *turn = median(t + 1, reps);
    {
        int br = cols / b, bc = rows / b;
        for (int i = 0; i < b; i++)
            for (int j = 0; j < b; j++) {
                if (!dst_mem[i * b + j]) continue;
                starpu_data_acquire(dst[i * b + j], STARPU_R);
                c32 *p = dst_mem[i * b + j];
                for (int y = 0; y < br; y++)
                    for (int x = 0; x < bc; x++) {
                        c32 v = value(j * bc + x, i * br + y);
                        if (p[y * bc + x].re != v.re || p[y * bc + x].im != v.im) wrong++;
                    }
                starpu_data_release(dst[i * b + j]);
            }
    }
    }
    for (int k = 0; k < b * b; k++) {
        starpu_data_unregister(src[k]);
        starpu_data_unregister(dst[k]);
        free(src_mem[k]);
        free(dst_mem[k]);
    }
    free(t);
    free(w);
    free(src);
    free(dst);
    free(src_mem);
    free(dst_mem);
    starpu_mpi_shutdown();
    return wrong;
}

/* ---- Bare MPI ---- */

/* The all-to-all alone (`bare`) and the corner turn by hand (`hand`), medians in ms. */
int mpi_run(int rows, int cols, int reps, double *bare, double *hand) {
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    int me, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int mine = rows / ranks, my_cols = cols / ranks;
    c32 *local = malloc(sizeof(c32) * mine * cols);
    for (int r = 0; r < mine; r++)
        for (int c = 0; c < cols; c++) local[r * cols + c] = value(me * mine + r, c);
    size_t block = (size_t)mine * my_cols;
    c32 *send = malloc(sizeof(c32) * block * ranks), *recv = malloc(sizeof(c32) * block * ranks);
    c32 *out = malloc(sizeof(c32) * my_cols * rows);
    double *tb = malloc(sizeof(double) * (reps + 1)), *th = malloc(sizeof(double) * (reps + 1));
    int count = (int)(block * sizeof(c32));
    for (int rep = 0; rep <= reps; rep++) {
        MPI_Request req;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Ialltoall(send, count, MPI_BYTE, recv, count, MPI_BYTE, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        tb[rep] = (MPI_Wtime() - t0) * 1e3;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int to = 0; to < ranks; to++)
            for (int c = 0; c < my_cols; c++)
                for (int r = 0; r < mine; r++)
                    send[to * block + c * mine + r] = local[r * cols + to * my_cols + c];
        MPI_Ialltoall(send, count, MPI_BYTE, recv, count, MPI_BYTE, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int from = 0; from < ranks; from++)
            for (int c = 0; c < my_cols; c++)
                memcpy(out + c * rows + from * mine, recv + from * block + c * mine,
                       sizeof(c32) * mine);
        th[rep] = (MPI_Wtime() - t0) * 1e3;
    }
    int wrong = 0;
    for (int c = 0; c < my_cols; c++)
        for (int r = 0; r < rows; r++) {
            c32 v = value(r, me * my_cols + c);
            if (out[c * rows + r].re != v.re || out[c * rows + r].im != v.im) wrong++;
        }
    *bare = median(tb + 1, reps);
    *hand = median(th + 1, reps);
    free(local);
    free(send);
    free(recv);
    free(out);
    free(tb);
    free(th);
    MPI_Finalize();
    return wrong;
}
