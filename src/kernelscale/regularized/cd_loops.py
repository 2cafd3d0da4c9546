"""The inner loops of coordinate descent (kernelscale.regularized.coordinate_descent), compiled by numba.

The functions below are plain Python written in the subset numba compiles. With numba installed
(a dependency of kernelscale) they are compiled on first use (cached on disk), and a sweep costs what
its arithmetic costs; kernelscale.regularized.coordinate_descent falls back to its own Python loops, which give
the same iterates (up to the rounding of float32 axpys), when numba is missing (a platform it does not support), when its
``USE_NUMBA`` switch is off, and for losses other than the six built-in classes.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from ..losses import logistic_margin_scalar, sigmoid

#: numba is installed; it is imported, and the loops compiled, only by :func:`compile_loops`
#: (``import kernelscale`` does not pay for it)
NUMBA_AVAILABLE = importlib.util.find_spec("numba") is not None
_compiled = False

# the scalar logistic resolvent of kernelscale.losses, compiled below (one implementation)
_nb_sigmoid = sigmoid
_nb_logistic_margin = logistic_margin_scalar


def _nb_step(code, v, y, alpha, C, eps):
    """S_i(v) = -J_{alpha}(v) of one coordinate: the formulas of the Loss.step methods."""
    if code == 0:
        return C * (alpha * y - v) / (alpha + C)
    if code == 1:
        a = alpha - y * v
        if a <= 0.0:
            return 0.0
        return y * (a if a < C else C)
    if code == 2:
        a = alpha - y * v
        if a <= 0.0:
            return 0.0
        return y * (2.0 * C) * a / (alpha + 2.0 * C)
    if code == 3:
        r = alpha * y - v
        if r >= 0.0:
            return r if r < C else C
        return r if -r < C else -C
    if code == 4:
        r = alpha * y - v
        m = abs(r) - alpha * eps
        if m <= 0.0:
            return 0.0
        m = m if m < C else C
        return m if r > 0.0 else -m
    if C <= 0.0:
        return 0.0
    s = _nb_logistic_margin(y * v / alpha, C / alpha)
    return y * C * _nb_sigmoid(-s)


# columns of the coordinate table Q of the compiled sweeps: a visit in random order reads one
# 32-byte row of it instead of four arrays
Q_COEF, Q_Y, Q_C, Q_INV_D = range(4)


def coordinate_table(c, y, C, inv_d):
    """The (n, 4) float64 table [c, y, C, 1/k_ii], rows aligned to 32 bytes."""
    n = c.shape[0]
    buf = np.zeros(4 * n + 4)
    skip = (-buf.ctypes.data % 32) // 8
    Q = buf[skip : skip + 4 * n].reshape(n, 4)
    Q[:, Q_COEF], Q[:, Q_Y], Q[:, Q_C], Q[:, Q_INV_D] = c, y, C, inv_d
    return Q


def _nb_update(i, zi, Q, code, eps):
    """The coordinate update of Algorithm 1 / 2, seen with z_i = zi: v_i = z_i / k_ii - c_i and the
    new coefficient S_i(v_i) (:func:`_nb_step`). Returns (new c_i, its change h, v_i); Q is left
    alone (the caller stores the new c_i once the step is applied)."""
    ci, ai = Q[i, Q_COEF], Q[i, Q_INV_D]
    v = zi * ai - ci
    new = _nb_step(code, v, Q[i, Q_Y], ai, Q[i, Q_C], eps)
    return new, new - ci, v


def _nb_note(i, h, changed, steps, k, max_h):
    """Book a moved coordinate: entry k of changed / steps; returns (k + 1, the new max |h|)."""
    changed[k] = i
    steps[k] = h
    if abs(h) > max_h:
        max_h = abs(h)
    return k + 1, max_h


def _nb_kernel_sweep(order, pos, Q, z, rows, slot_of, last_used, lru, code, eps, s2, state, hbuf, changed, steps,
                     counts):
    """Algorithm 1 over order[pos:] until a coordinate that moves has no cached row.

    Q is the coordinate table (:func:`coordinate_table`); state = [b, max |h|]; counts = [entries
    of changed/steps so far, LRU clock]. Returns the position reached (len(order) when the sweep
    is done).
    """
    m = order.shape[0]
    b = state[0]
    max_h = state[1]
    k = counts[0]
    clock = counts[1]
    while pos < m:
        i = order[pos]
        new, h, _ = _nb_update(i, z[i] + b, Q, code, eps)
        if h != 0.0:
            slot = slot_of[i]
            if slot < 0:
                break
            hbuf[0] = h  # h in the dtype of z and the rows
            hz = hbuf[0]
            row = rows[slot]
            for j in range(z.shape[0]):
                z[j] += hz * row[j]
            if lru:
                clock += 1
                last_used[slot] = clock
            b += s2 * h
            Q[i, Q_COEF] = new
            k, max_h = _nb_note(i, h, changed, steps, k, max_h)
        pos += 1
    state[0] = b
    state[1] = max_h
    counts[0] = k
    counts[1] = clock
    return pos


def _nb_linear_visit(i, zi, Q, code, eps, up_limit, down_limit, drop):
    """The update of coordinate i seen with z_i = zi (the new coefficient goes to Q): returns h
    and, when h = 0, marks drop[i] if shrinking removes it (pushed past its kink by more than the
    limit on its side; the side is sign(y_i - z_i) times the sign of y_i for classification)."""
    new, h, v = _nb_update(i, zi, Q, code, eps)
    if h != 0.0:
        Q[i, Q_COEF] = new
    else:
        ci, yi = Q[i, Q_COEF], Q[i, Q_Y]
        side = yi - zi
        if code == 1 or code == 2 or code == 5:
            side *= yi
        limit = up_limit if side > 0 else down_limit
        if _nb_kink_push(code, ci, v, yi, Q[i, Q_INV_D], Q[i, Q_C], eps) > limit:
            drop[i] = True
    return h


def _nb_linear_sweep(order, sparse, indptr, indices, data, X, w, Q, code, eps, s, state, hbuf, changed, steps, drop,
                     up_limit, down_limit):
    """Algorithm 2 over ``order``, X dense or CSR (indptr, indices, data: sorted, duplicate-free
    indices); state = [weight of the constant feature, max |h|, max(1, max |z_i|)]. Returns the
    number of coordinates that moved (in changed / steps)."""
    d = X.shape[1]
    wb = state[0]
    max_h = 0.0
    z_max = 1.0
    k = 0
    lo = hi = indptr[0]
    xi = X[0]
    for i in order:
        acc = 0.0
        if sparse:
            lo = indptr[i]
            hi = indptr[i + 1]
            for p in range(lo, hi):
                acc += data[p] * w[indices[p]]
        else:
            xi = X[i]
            for j in range(d):
                acc += xi[j] * w[j]
        zi = acc + s * wb
        if abs(zi) > z_max:
            z_max = abs(zi)
        h = _nb_linear_visit(i, zi, Q, code, eps, up_limit, down_limit, drop)
        if h != 0.0:
            hbuf[0] = h  # h in the dtype of w and X
            hw = hbuf[0]
            if sparse:
                for p in range(lo, hi):
                    w[indices[p]] += hw * data[p]
            else:
                for j in range(d):
                    w[j] += hw * xi[j]
            wb += s * h
            k, max_h = _nb_note(i, h, changed, steps, k, max_h)
    state[0] = wb
    state[1] = max_h
    state[2] = z_max
    return k


def shuffle(order, m, rand, pos):
    """Fisher-Yates shuffle of order[:m] in place with the floats rand[pos : pos + m - 1] in [0, 1).

    The "random" index rule's permutations come from one stream of floats, so the Python and the
    compiled solvers (which shuffle inside a run of sweeps) visit the coordinates in the same order.
    """
    for t in range(m - 1, 0, -1):
        j = int(rand[pos] * (t + 1))
        pos += 1
        tmp = order[t]
        order[t] = order[j]
        order[j] = tmp


def _nb_kink_push(code, c, v, y, alpha, C, eps):
    """Scalar form of the Loss.kink_push methods (-inf: not at a kink)."""
    if code == 1:
        a = y * c
        free = alpha - y * v
        if a == 0.0:
            return -free
        if a == C:
            return free - C
        return -math.inf
    if code == 2:
        if c == 0.0:
            return y * v - alpha
        return -math.inf
    if code == 3 or code == 4:
        r = alpha * y - v
        excess = abs(r) - (alpha * eps if code == 4 else 0.0)
        if code == 4 and c == 0.0:
            return -excess
        if abs(c) == C and ((r > 0.0 and c > 0.0) or (r < 0.0 and c < 0.0)):
            return excess - C
    return -math.inf


# outcomes of a run of linear sweeps
RUN_FULL = 0  # a sweep over all active coordinates ended (the caller records the objectives)
RUN_TOL = 1  # such a sweep met the tolerance: the caller recomputes w exactly and decides
RUN_RANDOM = 2  # the stream of random floats is too short for the next sweep
RUN_LIMIT = 3  # max_sweeps sweeps are done


def _nb_sweep_order(work, m, order, rand, rpos, rule, sweep):
    """order[:m]: the working set work[:m] in the rule's order for sweep number ``sweep`` (rule 0
    cyclic, 1 aitken, 2 random: shuffled with rand[rpos:]). Returns the new position in rand, or
    -1 when rand holds too few floats for the shuffle (order untouched)."""
    if rule == 2:
        need = m - 1 if m > 1 else 0
        if rpos + need > rand.shape[0]:
            return -1
        order[:m] = work[:m]
        shuffle(order, m, rand, rpos)
        return rpos + need
    if rule == 1 and sweep % 2 == 1:
        order[:m] = work[:m][::-1]
    else:
        order[:m] = work[:m]
    return rpos


def _nb_largest_move(steps, changed, k, diag):
    """max_t |steps[t]| k_ii over the k coordinates i = changed[t] that moved in a sweep: the
    largest change of a z_i by its own update (0 when none moved)."""
    moved = 0.0
    for t in range(k):
        a = abs(steps[t]) * diag[changed[t]]
        if a > moved:
            moved = a
    return moved


def _nb_linear_run(work, active, order, rand, ist, fst, sparse, indptr, indices, data, X, w, Q, diag, code, eps, s,
                   hbuf, changed, steps, drop, stat_change, stat_size):
    """Sweeps of Algorithm 2 with the shrinking and the stopping rule of ``_Sweeps.after_sweep``
    (linear path, one-sided thresholds), without returning to Python between shrunk sweeps.

    work[:m] is the (sorted) working set, active all active coordinates, Q the coordinate table
    (:func:`coordinate_table`). ist = [m, sweeps so far, position in rand, max_sweeps, rule (0 cyclic,
    1 aitken, 2 random), shrinking]; fst = [weight of the constant feature, tol, precision floor
    factor, last sweep's largest up / down steps, z_floor of the last sweep]. Sweep t
    of this run leaves its largest change and working-set size in stat_change[t], stat_size[t].
    Returns (outcome, sweeps done).
    """
    n_active = active.shape[0]
    m, sweep, rpos, max_sweeps, rule, shrinking = ist[0], ist[1], ist[2], ist[3], ist[4], ist[5]
    tol, floor_eps = fst[1], fst[2]
    last_up, last_down = fst[3], fst[4]
    state = np.array([fst[0], 0.0, 1.0])
    outcome = RUN_LIMIT
    done = 0
    while done < max_sweeps:
        moved_to = _nb_sweep_order(work, m, order, rand, rpos, rule, sweep)
        if moved_to < 0:
            outcome = RUN_RANDOM
            break
        rpos = moved_to
        up_limit = last_up if shrinking else math.inf
        down_limit = last_down if shrinking else math.inf
        k = _nb_linear_sweep(order[:m], sparse, indptr, indices, data, X, w, Q, code, eps, s, state, hbuf, changed,
                             steps, drop, up_limit, down_limit)
        max_h = state[1]
        sweep += 1
        stat_change[done] = max_h
        stat_size[done] = m
        done += 1
        full = m == n_active
        z_floor = floor_eps * state[2]
        fst[5] = z_floor
        moved = _nb_largest_move(steps, changed, k, diag)
        kept = 0
        for t in range(m):  # shrink (unless the solver stops or un-shrinks below)
            i = work[t]
            if drop[i]:
                drop[i] = False
            else:
                work[kept] = i
                kept += 1
        if max_h < tol or moved < z_floor:
            if not full:  # un-shrink: a full sweep must confirm
                m = n_active
                work[:m] = active
                last_up = math.inf
                last_down = math.inf
                continue
            work[:m] = active
            outcome = RUN_TOL
            break
        m = kept
        up = 0.0
        down = 0.0
        for t in range(k):
            a = steps[t]
            if code == 1 or code == 2 or code == 5:
                a *= Q[changed[t], Q_Y]
            if a > up:
                up = a
            if -a > down:
                down = -a
        last_up = up if up > 0.0 else math.inf
        last_down = down if down > 0.0 else math.inf
        if full:
            outcome = RUN_FULL
            break
    ist[0], ist[1], ist[2] = m, sweep, rpos
    fst[0], fst[3], fst[4] = state[0], last_up, last_down
    return outcome, done


RUN_ROW = 4  # a coordinate that moves has no cached row: the caller fetches it and ends the sweep


def _nb_value(code, y, z, eps):
    """Scalar form of the Loss.value methods."""
    if code == 0:
        return 0.5 * (y - z) ** 2
    if code == 1 or code == 2:
        a = 1.0 - y * z
        a = a if a > 0.0 else 0.0
        return a if code == 1 else a * a
    if code == 3 or code == 4:
        a = abs(y - z) - (eps if code == 4 else 0.0)
        return a if a > 0.0 else 0.0
    t = y * z  # logistic: log(1 + exp(-t)), stably
    return math.log1p(math.exp(-t)) if t > 0.0 else -t + math.log1p(math.exp(t))


def _nb_conjugate(code, c, y, C, eps):
    """Scalar form of the Loss.conjugate methods (inf outside their domain)."""
    if code == 0:
        if C > 0.0:
            return c * c / (2.0 * C) - c * y
        return 0.0 if c == 0.0 else math.inf
    if code == 1 or code == 2:
        a = y * c
        if a < 0.0 or (code == 1 and a > C) or (code == 2 and C <= 0.0 and a != 0.0):
            return math.inf
        if code == 1:
            return -a
        return (a * a / (4.0 * C) if C > 0.0 else 0.0) - a
    if code == 3 or code == 4:
        if abs(c) > C:
            return math.inf
        return -c * y + (eps * abs(c) if code == 4 else 0.0)
    a = y * c / C if C > 0.0 else 0.0
    if a < 0.0 or a > 1.0 or (C <= 0.0 and c != 0.0):
        return math.inf
    return C * ((a * math.log(a) if a > 0.0 else 0.0) + (1.0 - a) * (math.log(1.0 - a) if a < 1.0 else 0.0))


def _nb_kernel_run(work, active, order, rand, ist, fst, Q, z, rows, slot_of, last_used, lru, diag, code, eps, s2,
                   hbuf, changed, steps, mark, state, counts, stat_change, stat_size, stat_primal, stat_dual):
    """Sweeps of Algorithm 1 with the objectives, the shrinking and the stopping rule of
    ``_Sweeps.after_sweep`` (kernel path), without returning to Python between sweeps.

    work[:m] is the working set, active all active coordinates, Q the coordinate table, z = K c
    without the intercept b = state[0]. ist = [m, sweeps so far, position in rand, max_sweeps,
    rule (0 cyclic, 1 aitken, 2 random), shrinking, position reached in the interrupted sweep];
    fst = [tol, precision floor factor, last sweep's largest change, z_floor of the last
    sweep]. Sweep t leaves its largest change, working-set size and objectives F, D in
    stat_change[t], stat_size[t], stat_primal[t], stat_dual[t]. Returns (outcome, sweeps done);
    on RUN_ROW, order[:m] is the interrupted sweep's order, ist[6] where it stopped, state and
    counts as :func:`_nb_kernel_sweep` left them. hbuf (one entry of z's dtype) also rounds b to
    that dtype for the objectives, the shrinking and the precision floor, which see z + b as the
    Python book-keeping does (in float32 for float32 rows).
    """
    n_active = active.shape[0]
    n = z.shape[0]
    m, sweep, rpos, max_sweeps, rule, shrinking = ist[0], ist[1], ist[2], ist[3], ist[4], ist[5]
    tol, floor_eps, last_change = fst[0], fst[1], fst[2]
    outcome = RUN_LIMIT
    done = 0
    while done < max_sweeps:
        moved_to = _nb_sweep_order(work, m, order, rand, rpos, rule, sweep)
        if moved_to < 0:
            outcome = RUN_RANDOM
            break
        rpos = moved_to
        state[1] = 0.0
        counts[0] = 0
        pos = _nb_kernel_sweep(order[:m], 0, Q, z, rows, slot_of, last_used, lru, code, eps, s2, state, hbuf,
                               changed, steps, counts)
        if pos < m:
            ist[6] = pos
            outcome = RUN_ROW
            break
        b, max_h, k = state[0], state[1], counts[0]
        hbuf[0] = b  # z_i + b in the dtype of z, as the Python book-keeping rounds it
        bz = hbuf[0]
        primal = 0.0
        dual = 0.0
        cz = 0.0
        for i in range(n):
            zi = float(z[i] + bz)
            ci = Q[i, Q_COEF]
            primal += Q[i, Q_C] * _nb_value(code, Q[i, Q_Y], zi, eps)
            dual += _nb_conjugate(code, ci, Q[i, Q_Y], Q[i, Q_C], eps)
            cz += ci * zi
        stat_primal[done] = primal + 0.5 * cz
        stat_dual[done] = dual + 0.5 * cz
        stat_change[done] = max_h
        stat_size[done] = m
        sweep += 1
        done += 1
        full = m == n_active
        zmax = 1.0
        for t in range(m):
            a = abs(float(z[work[t]] + bz))
            if a > zmax:
                zmax = a
        z_floor = floor_eps * zmax
        fst[3] = z_floor
        moved = _nb_largest_move(steps, changed, k, diag)
        if max_h < tol or moved < z_floor:
            if not full:  # un-shrink: a full sweep must confirm
                m = n_active
                work[:m] = active
                last_change = math.inf
                continue
            outcome = RUN_TOL
            break
        if shrinking and sweep > 1:
            for t in range(k):
                mark[changed[t]] = True
            kept = 0
            for t in range(m):
                i = work[t]
                drop = False
                if not mark[i]:
                    ai = Q[i, Q_INV_D]
                    v = float(z[i] + bz) * ai - Q[i, Q_COEF]
                    drop = _nb_kink_push(code, Q[i, Q_COEF], v, Q[i, Q_Y], ai, Q[i, Q_C], eps) > last_change
                if not drop:
                    work[kept] = i
                    kept += 1
            for t in range(k):
                mark[changed[t]] = False
            m = kept
        last_change = max_h
    ist[0], ist[1], ist[2] = m, sweep, rpos
    fst[2] = last_change
    return outcome, done


def compile_loops():
    """Replace the loops of this module by their numba versions (once; needs numba). The
    compiled loops call each other through these module globals.

    Every build names its fastmath flags: a numba function that names none takes those of the
    caller it is first compiled for, and its disk cache keeps them (unnamed, the iterates depended
    on which solver ran first on a fresh cache). The linear sweep and what it calls are built with
    reassociation and contraction (vectorised dot products, fused multiply-adds), the rest
    without. The helpers that both sweeps share (:func:`_nb_update`, :func:`_nb_note`) are
    inlined into their callers by numba: they cost no call and take the caller's flags.
    """
    global _compiled, _nb_sigmoid, _nb_logistic_margin, _nb_step, _nb_update, _nb_note, _nb_kernel_sweep
    global _nb_linear_visit, _nb_linear_sweep, _nb_kink_push, shuffle, _nb_linear_run
    global _nb_value, _nb_conjugate, _nb_kernel_run, _nb_sweep_order, _nb_largest_move
    if _compiled:
        return
    import numba

    _jit = numba.njit(cache=True, nogil=True, fastmath=False)
    _fast = numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
    _inline = numba.njit(cache=True, nogil=True, inline="always")
    numba.extending.register_jitable(sigmoid)  # called by logistic_margin_scalar
    _nb_sigmoid = _jit(sigmoid)
    _nb_logistic_margin = _jit(logistic_margin_scalar)
    _nb_step = _jit(_nb_step)
    _nb_update = _inline(_nb_update)
    _nb_note = _inline(_nb_note)
    _nb_kernel_sweep = _jit(_nb_kernel_sweep)
    _nb_linear_visit = _fast(_nb_linear_visit)
    _nb_kink_push = _fast(_nb_kink_push)
    _nb_linear_sweep = _fast(_nb_linear_sweep)
    shuffle = _jit(shuffle)
    _nb_linear_run = _jit(_nb_linear_run)
    _nb_sweep_order = _inline(_nb_sweep_order)
    _nb_largest_move = _inline(_nb_largest_move)
    _nb_value = _jit(_nb_value)
    _nb_conjugate = _jit(_nb_conjugate)
    _nb_kernel_run = _jit(_nb_kernel_run)
    _compiled = True
