// Built-in kernels of the RIMMS CUDA backend, compiled once per process with NVRTC and
// loaded as one module per device (see kernels.rs).
//
// Complex numbers are `cpx` (x = re, y = im, 8-byte aligned), the layout of
// num_complex::Complex32 and of CUDA's float2 / cuFFT's cufftComplex. The file defines its
// own type and helpers instead of using float2 / make_float2, so it needs nothing from CUDA's
// headers beyond the math functions NVRTC always provides.
//
// Element-wise kernels use grid-stride loops, so any grid size covers any length, and they
// allow the output to be the input (in place); fftshift, transpose and gemm do not (the
// launcher refuses overlapping ranges).

#define RIMMS_GRID_STRIDE(i, n)                                                          \
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; \
         i < (n); i += (unsigned long long)blockDim.x * gridDim.x)

struct alignas(8) cpx {
    float x;
    float y;
};

static __device__ __forceinline__ cpx mk(float x, float y) {
    cpx r;
    r.x = x;
    r.y = y;
    return r;
}

static __device__ __forceinline__ cpx c_add(cpx a, cpx b) {
    return mk(a.x + b.x, a.y + b.y);
}

static __device__ __forceinline__ cpx c_sub(cpx a, cpx b) {
    return mk(a.x - b.x, a.y - b.y);
}

static __device__ __forceinline__ cpx c_mul(cpx a, cpx b) {
    return mk(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// a * conj(b)
static __device__ __forceinline__ cpx c_mul_conj(cpx a, cpx b) {
    return mk(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y);
}

// a / b by Smith's method: no overflow of |b|^2 for large b.
static __device__ __forceinline__ cpx c_div(cpx a, cpx b) {
    if (fabsf(b.x) >= fabsf(b.y)) {
        float r = b.y / b.x;
        float d = b.x + b.y * r;
        return mk((a.x + a.y * r) / d, (a.y - a.x * r) / d);
    } else {
        float r = b.x / b.y;
        float d = b.x * r + b.y;
        return mk((a.x * r + a.y) / d, (a.y * r - a.x) / d);
    }
}

// op: 0 add, 1 sub, 2 mul, 3 div, 4 mul by conjugate (a * conj(b)).
static __device__ __forceinline__ cpx c_op(cpx x, cpx y, int op) {
    switch (op) {
        case 0: return c_add(x, y);
        case 1: return c_sub(x, y);
        case 2: return c_mul(x, y);
        case 3: return c_div(x, y);
        default: return c_mul_conj(x, y);
    }
}

extern "C" __global__ void rimms_zip(const cpx* a, const cpx* b, cpx* out,
                                     unsigned long long n, int op) {
    RIMMS_GRID_STRIDE(i, n) { out[i] = c_op(a[i], b[i], op); }
}

// out[i] = a[i] op row[i % row_len]: a matrix of rows of row_len, each zipped with the one
// row (a filter's spectrum applied to every pulse). op as rimms_zip's.
extern "C" __global__ void rimms_zip_rows(const cpx* a, const cpx* row, cpx* out,
                                          unsigned long long n, unsigned long long row_len,
                                          int op) {
    RIMMS_GRID_STRIDE(i, n) { out[i] = c_op(a[i], row[i % row_len], op); }
}

// out[i] = x[i] * w[i % row_len]: every row of row_len tapered by one real window.
extern "C" __global__ void rimms_window_rows(const cpx* x, const float* w, cpx* out,
                                             unsigned long long n,
                                             unsigned long long row_len) {
    RIMMS_GRID_STRIDE(i, n) {
        cpx v = x[i];
        float f = w[i % row_len];
        out[i] = mk(v.x * f, v.y * f);
    }
}

extern "C" __global__ void rimms_conj(const cpx* x, cpx* out, unsigned long long n) {
    RIMMS_GRID_STRIDE(i, n) {
        cpx v = x[i];
        out[i] = mk(v.x, -v.y);
    }
}

// |x| without overflow of re^2 + im^2.
extern "C" __global__ void rimms_magnitude(const cpx* x, float* out, unsigned long long n) {
    RIMMS_GRID_STRIDE(i, n) {
        cpx v = x[i];
        out[i] = hypotf(v.x, v.y);
    }
}

// |x|^2 = re^2 + im^2 (the CPU's `power`: it may overflow to infinity where |x| would not).
extern "C" __global__ void rimms_power(const cpx* x, float* out, unsigned long long n) {
    RIMMS_GRID_STRIDE(i, n) {
        cpx v = x[i];
        out[i] = v.x * v.x + v.y * v.y;
    }
}

// out = x * (re + i im)
extern "C" __global__ void rimms_scale(const cpx* x, cpx* out, unsigned long long n,
                                       float re, float im) {
    cpx f = mk(re, im);
    RIMMS_GRID_STRIDE(i, n) { out[i] = c_mul(x[i], f); }
}

// numpy.fft.fftshift of every row: out[r][(c + cols/2) % cols] = x[r][c].
extern "C" __global__ void rimms_fftshift_rows(const cpx* x, cpx* out,
                                               unsigned long long rows,
                                               unsigned long long cols) {
    unsigned long long half = cols / 2;
    RIMMS_GRID_STRIDE(i, rows * cols) {
        unsigned long long r = i / cols;
        unsigned long long c = i - r * cols;
        unsigned long long d = c + half;
        if (d >= cols) d -= cols;
        out[r * cols + d] = x[i];
    }
}

// out (cols x rows) = transpose of x (rows x cols), row-major, through a 32 x 32 tile in
// shared memory so that both the reads and the writes are coalesced. Blocks of 32 x 8
// threads; grid (ceil(cols / 32), ceil(rows / 32)).
#define RIMMS_TILE 32
#define RIMMS_TILE_ROWS 8
extern "C" __global__ void rimms_transpose(const cpx* x, cpx* out, unsigned int rows,
                                           unsigned int cols) {
    __shared__ cpx tile[RIMMS_TILE][RIMMS_TILE + 1];
    unsigned int c0 = blockIdx.x * RIMMS_TILE;
    unsigned int r0 = blockIdx.y * RIMMS_TILE;
    for (unsigned int j = threadIdx.y; j < RIMMS_TILE; j += RIMMS_TILE_ROWS) {
        unsigned int r = r0 + j;
        unsigned int c = c0 + threadIdx.x;
        if (r < rows && c < cols) {
            tile[j][threadIdx.x] = x[(unsigned long long)r * cols + c];
        }
    }
    __syncthreads();
    for (unsigned int j = threadIdx.y; j < RIMMS_TILE; j += RIMMS_TILE_ROWS) {
        unsigned int orow = c0 + j;          // a column of x
        unsigned int ocol = r0 + threadIdx.x; // a row of x
        if (orow < cols && ocol < rows) {
            out[(unsigned long long)orow * rows + ocol] = tile[threadIdx.x][j];
        }
    }
}

// c (m x n) = a (m x k) . b (k x n), complex, row-major, with 16 x 16 tiles of a and b in
// shared memory. Blocks of 16 x 16 threads; grid (ceil(n / 16), ceil(m / 16)).
#define RIMMS_GEMM_TILE 16
extern "C" __global__ void rimms_gemm(const cpx* a, const cpx* b, cpx* c, unsigned int m,
                                      unsigned int k, unsigned int n) {
    __shared__ cpx as[RIMMS_GEMM_TILE][RIMMS_GEMM_TILE];
    __shared__ cpx bs[RIMMS_GEMM_TILE][RIMMS_GEMM_TILE];
    unsigned int tx = threadIdx.x;
    unsigned int ty = threadIdx.y;
    unsigned int row = blockIdx.y * RIMMS_GEMM_TILE + ty;
    unsigned int col = blockIdx.x * RIMMS_GEMM_TILE + tx;
    cpx zero = mk(0.0f, 0.0f);
    cpx acc = zero;
    for (unsigned int t = 0; t < k; t += RIMMS_GEMM_TILE) {
        unsigned int ac = t + tx;
        unsigned int br = t + ty;
        as[ty][tx] = (row < m && ac < k) ? a[(unsigned long long)row * k + ac] : zero;
        bs[ty][tx] = (br < k && col < n) ? b[(unsigned long long)br * n + col] : zero;
        __syncthreads();
        for (unsigned int p = 0; p < RIMMS_GEMM_TILE; ++p) {
            acc = c_add(acc, c_mul(as[ty][p], bs[p][tx]));
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        c[(unsigned long long)row * n + col] = acc;
    }
}
