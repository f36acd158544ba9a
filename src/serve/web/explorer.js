// Attention explorer for `nmt serve`: translate Chinese lines, then look at
// the encoder self, decoder self and cross attention of one sentence, by
// layer and head (or the mean of the heads), as a heatmap drawn on a canvas
// (one element however long the sentence; the token labels stay text).
// Same-origin only: GET v1/info, POST v1/translate {text, beam, attention}.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const el = {
    form: $('translate-form'), source: $('source'), beam: $('beam'), translate: $('translate'),
    error: $('error'), translation: $('translation'), stats: $('stats'), modelInfo: $('model-info'),
    sentenceField: $('sentence-field'), sentence: $('sentence'), examples: $('examples'),
    kind: $('kind'), layer: $('layer'), head: $('head'), scale: $('scale'), caption: $('caption'),
    mapArea: $('map-area'), heatmap: $('heatmap'), empty: $('empty'), legend: $('legend'),
    readout: $('readout'), tooltip: $('tooltip'), overview: $('overview'),
  };

  const KINDS = {
    encoder_self: {
      name: 'Encoder self-attention',
      rows: 'source', cols: 'source',
      caption: 'Each source token (row) attends over every source token (columns). Each row sums to 1.',
    },
    decoder_self: {
      name: 'Decoder self-attention',
      rows: 'target', cols: 'target',
      caption: 'Each target position (row: the token fed in) attends over itself and the earlier target ' +
               'positions (columns). Later positions are masked (hatched): the decoder cannot see the future.',
    },
    cross: {
      name: 'Cross-attention',
      rows: 'target', cols: 'source',
      caption: 'Each target position (row: the token fed in, predicting the next one) attends over the ' +
               'source tokens (columns). Each row sums to 1.',
    },
  };
  const WORD_START = '\u2581';  // SentencePiece's word-boundary mark
  // A phone or tablet: no hover, a finger for a pointer.
  const TOUCH = window.matchMedia('(hover: none) and (pointer: coarse)').matches;

  const state = {
    info: null,
    results: [],      // [{text, translation, att}] of the last request
    sentence: 0,
    kind: 'cross', layer: null, head: 'mean', scale: 'linear',
    busy: false,
    view: null,       // what the heatmap shows now (see buildView)
    active: null,     // {r, c} of the highlighted cell
  };

  // ---- colour scale: YlGnBu (ColorBrewer, sequential), interpolated -------
  const STOPS = ['#ffffd9', '#edf8b1', '#c7e9b4', '#7fcdbb', '#41b6c4', '#1d91c0', '#225ea8', '#253494', '#081d58']
    .map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
  const LUT = Array.from({ length: 256 }, (_, i) => {
    const x = (i / 255) * (STOPS.length - 1);
    const k = Math.min(Math.floor(x), STOPS.length - 2);
    const f = x - k;
    return STOPS[k].map((v, j) => Math.round(v + (STOPS[k + 1][j] - v) * f));
  });
  const LUT_CSS = LUT.map((c) => `rgb(${c[0]},${c[1]},${c[2]})`);
  const MASKED_RGB = [226, 229, 234];

  function scaled(v) {  // value in [0,1] -> position on the colour ramp in [0,1]
    const x = Math.min(Math.max(v, 0), 1);
    return state.scale === 'sqrt' ? Math.sqrt(x) : x;
  }
  const lutIndex = (v) => Math.round(scaled(v) * 255);

  // ---- tokens -------------------------------------------------------------
  const isSpecial = (p) => /^<[^<>\s]+>$/.test(p);

  // Fills `node` with a readable rendering of a SentencePiece piece: a faint
  // "·" where a word starts, special tokens set apart.
  function renderToken(node, piece) {
    node.textContent = '';
    if (isSpecial(piece)) {
      node.classList.add('special');
      node.textContent = piece;
      return;
    }
    let text = piece;
    if (text.startsWith(WORD_START)) {
      const mark = document.createElement('span');
      mark.className = 'ws';
      mark.textContent = '·';
      node.append(mark);
      text = text.slice(1);
    }
    node.append(text.split(WORD_START).join(' '));
  }
  // A column label: Chinese pieces stacked upright, one character a line;
  // others rotated to read upwards. (Done by hand: vertical writing-mode
  // measures and paints fallback CJK fonts differently in some Chromiums.)
  const CJK_ONLY = /^[\p{Script=Han}\u3000-\u303f\uff00-\uffef]+$/u;
  function columnText(piece) {
    const span = document.createElement('span');
    const body = piece.startsWith(WORD_START) ? piece.slice(1) : piece;
    if (!isSpecial(piece) && CJK_ONLY.test(body) && [...body].length <= 6) {
      span.className = 'ctext stack';
      if (body !== piece) {
        const mark = document.createElement('span');
        mark.className = 'ws';
        mark.textContent = '·';
        span.append(mark);
      }
      span.append([...body].join('\n'));
    } else {
      span.className = 'ctext rot';
      renderToken(span, piece);
    }
    return span;
  }
  const tokenText = (p) => (isSpecial(p) ? p : (p.startsWith(WORD_START) ? '·' + p.slice(1) : p).split(WORD_START).join(' '));

  // ---- requests -----------------------------------------------------------
  async function api(path, body) {
    let res;
    try {
      res = await fetch(path, body === undefined ? { cache: 'no-store' } : {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
      });
    } catch (e) {
      throw new Error(`Could not reach the server (${e.message}).`);
    }
    const text = await res.text();
    let data = null;
    try { data = JSON.parse(text); } catch (_) { /* reported below */ }
    if (!res.ok) {
      let message = (data && data.error && data.error.message) || text.trim() || res.statusText || 'request failed';
      if (res.status === 503) {
        const after = res.headers.get('Retry-After');
        message = `Server busy: ${message}` + (after ? ` Try again in ${after} s.` : ' Try again shortly.');
      }
      const err = new Error(`${message} (HTTP ${res.status})`);
      err.status = res.status;
      throw err;
    }
    if (data === null || typeof data !== 'object') throw new Error('The server answered with something other than JSON.');
    return { data, timing: res.headers.get('Server-Timing') };
  }

  function showError(message) {
    el.error.textContent = message;
    el.error.hidden = !message;
  }

  async function loadInfo() {
    try {
      const { data } = await api('v1/info');
      state.info = data;
      const chips = [
        ['layers', `${data.encoder_layers} encoder + ${data.decoder_layers} decoder layers`],
        ['heads', `${data.heads} heads`],
        ['d_model', `d_model ${data.d_model}`],
        ['backend', `${data.attention} attention · ${data.device}`],
        ['model', data.model],
      ];
      el.modelInfo.textContent = '';
      for (const [key, text] of chips) {
        const chip = document.createElement('span');
        chip.className = `chip chip-${key}`;
        chip.textContent = text;
        chip.title = key === 'model' ? `Model: ${text}` : text;
        el.modelInfo.append(chip);
      }
      el.modelInfo.dataset.state = 'ready';
      showExamples(Array.isArray(data.examples) ? data.examples : []);
      if (!state.results.length) fillLayerHead();
    } catch (e) {
      el.modelInfo.textContent = `Model info unavailable: ${e.message}`;
      el.modelInfo.dataset.state = 'error';
    }
  }

  // The model's own examples (v1/info: lines of its validation sources), so
  // that a toy model is shown toy sentences and a software model messages.
  function showExamples(examples) {
    el.examples.textContent = '';
    for (const ex of examples) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'example';
      b.lang = 'zh';
      b.textContent = ex;
      b.title = 'Translate this example';
      b.addEventListener('click', () => { el.source.value = ex; translate(); });
      el.examples.append(b);
    }
    el.examples.hidden = !examples.length;
  }

  function setBusy(busy) {
    state.busy = busy;
    el.translate.disabled = busy;
    el.translate.classList.toggle('busy', busy);
    el.translate.querySelector('.btn-label').textContent = busy ? 'Translating…' : 'Translate';
    el.source.setAttribute('aria-busy', String(busy));
    document.body.classList.toggle('is-busy', busy);
  }

  async function translate() {
    if (state.busy) return;
    const lines = el.source.value.split(/\r?\n/).map((s) => s.trim()).filter((s) => s.length);
    if (!lines.length) {
      showError('Type a Chinese sentence to translate (one per line).');
      el.source.focus();
      return;
    }
    showError('');
    setBusy(true);
    el.translation.textContent = '';
    el.stats.textContent = '';
    const started = performance.now();
    try {
      const { data, timing } = await api('v1/translate', {
        text: lines, beam: Number(el.beam.value), attention: true,
      });
      const ok = Array.isArray(data.translations) && Array.isArray(data.attention) &&
                 data.translations.length === lines.length && data.attention.length === lines.length;
      if (!ok) throw new Error('The server answer lacks translations or attention maps for every line.');
      const marked = (key) => new Set(Array.isArray(data[key]) ? data[key] : []);
      const limited = marked('length_limited'), cut = marked('cut'), lost = marked('placeholders_lost');
      state.results = lines.map((text, i) => ({
        text, translation: String(data.translations[i]), att: data.attention[i],
        notes: [
          cut.has(i) && 'the sentence was longer than the model reads: only its beginning was translated',
          limited.has(i) && 'stopped at the length limit before ending: it may be cut short',
          lost.has(i) && 'lost a placeholder of the sentence',
        ].filter(Boolean),
      }));
      state.sentence = 0;
      const ms = Math.round(performance.now() - started);
      const model = /translate;dur=([\d.]+)/.exec(timing || '');
      el.stats.textContent = `${lines.length > 1 ? lines.length + ' sentences · ' : ''}${ms} ms` +
        (model ? ` (model ${Math.round(Number(model[1]))} ms)` : '');
      showResults();
    } catch (e) {
      // The previous result is not this input's: it goes, rather than stay
      // under the error as if it were current.
      showError(e.message);
      state.results = [];
      state.sentence = 0;
      showResults();
    } finally {
      setBusy(false);
    }
  }

  // ---- results, selects ---------------------------------------------------
  const current = () => state.results[state.sentence] || null;

  function renderTranslations() {
    el.translation.textContent = '';
    const many = state.results.length > 1;
    el.translation.classList.toggle('many', many);
    state.results.forEach((r, i) => {
      const line = document.createElement(many ? 'button' : 'div');
      line.className = 'tr-line' + (i === state.sentence ? ' selected' : '');
      if (many) {
        line.type = 'button';
        line.setAttribute('aria-pressed', String(i === state.sentence));
        line.title = r.text;
        line.addEventListener('click', () => selectSentence(i));
        const n = document.createElement('span');
        n.className = 'tr-num';
        n.textContent = `${i + 1}`;
        line.append(n);
      }
      const t = document.createElement('span');
      t.className = 'tr-text';
      if (r.translation) t.textContent = r.translation;
      else { t.textContent = '(empty translation)'; t.classList.add('muted'); }
      line.append(t);
      // What the answer says of this translation beyond its text.
      for (const note of r.notes || []) {
        const n = document.createElement('span');
        n.className = 'tr-note';
        n.textContent = note;
        line.append(n);
      }
      el.translation.append(line);
    });
  }

  function showResults() {
    el.sentence.textContent = '';
    state.results.forEach((r, i) => {
      const short = r.text.length > 28 ? r.text.slice(0, 27) + '…' : r.text;
      el.sentence.append(new Option(`${i + 1}. ${short}`, String(i)));
    });
    el.sentence.value = String(state.sentence);
    el.sentenceField.hidden = state.results.length < 2;
    renderTranslations();
    fillLayerHead();
    render();
  }

  function selectSentence(i) {
    state.sentence = i;
    el.sentence.value = String(i);
    renderTranslations();
    fillLayerHead();
    render();
  }

  // Layer and head counts: from the maps when there are some (the encoder's
  // and decoder's layer counts may differ), else from /v1/info.
  function dims(kind) {
    const r = current();
    if (r && Array.isArray(r.att[kind])) return { layers: r.att[kind].length, heads: (r.att[kind][0] || []).length };
    if (state.info) {
      return { layers: kind === 'encoder_self' ? state.info.encoder_layers : state.info.decoder_layers, heads: state.info.heads };
    }
    return { layers: 0, heads: 0 };
  }

  function fillLayerHead() {
    const { layers, heads } = dims(state.kind);
    if (layers && (state.layer === null || state.layer >= layers)) state.layer = layers - 1;
    if (state.head !== 'mean' && Number(state.head) >= heads) state.head = 'mean';
    el.layer.textContent = '';
    for (let l = 0; l < layers; ++l) el.layer.append(new Option(`${l + 1}`, String(l)));
    el.layer.title = `${layers} layers`;
    if (layers) el.layer.value = String(state.layer);
    el.head.textContent = '';
    el.head.append(new Option(`Mean of ${heads} heads`, 'mean'));
    for (let h = 0; h < heads; ++h) el.head.append(new Option(`Head ${h + 1}`, String(h)));
    el.head.value = String(state.head);
  }

  // ---- the matrix shown ---------------------------------------------------
  // rows x cols values for kind/layer/head; 'mean' averages the heads.
  function matrix(att, kind, layer, head) {
    const perHead = att[kind][layer];
    if (head !== 'mean') return perHead[Number(head)];
    const rows = perHead[0].length, cols = rows ? perHead[0][0].length : 0;
    const m = Array.from({ length: rows }, () => new Array(cols).fill(0));
    for (const h of perHead) {
      for (let r = 0; r < rows; ++r) for (let c = 0; c < cols; ++c) m[r][c] += h[r][c];
    }
    for (const row of m) for (let c = 0; c < cols; ++c) row[c] /= perHead.length;
    return m;
  }

  function buildView(kind, layer, head) {
    const r = current();
    const att = r.att;
    const src = att.source, tin = att.target_in, tout = att.target_out || [];
    const rowTok = KINDS[kind].rows === 'source' ? src : tin;
    const colTok = KINDS[kind].cols === 'source' ? src : tin;
    return {
      kind, layer, head, rowTok, colTok,
      predicts: KINDS[kind].rows === 'target' ? tout : null,
      m: matrix(att, kind, layer, head),
      causal: kind === 'decoder_self',
    };
  }

  // ---- heatmap ------------------------------------------------------------
  let rowLabels = [], colLabels = [], canvas = null;
  const GAP = 1;  // px between cells

  function render() {
    const r = current();
    el.kind.value = state.kind;
    el.caption.textContent = '';
    const title = document.createElement('strong');
    title.textContent = KINDS[state.kind].name + '. ';
    el.caption.append(title, KINDS[state.kind].caption, ' ');
    const hint = document.createElement('span');
    hint.className = 'hint';
    hint.textContent = '“·” marks a word start.';
    el.caption.append(hint);
    hideTooltip();
    if (!r) {
      el.heatmap.replaceChildren();
      el.heatmap.hidden = true;
      el.empty.hidden = false;
      state.view = null;
      canvas = null;
      renderLegend();
      renderOverview();
      return;
    }
    el.heatmap.hidden = false;
    el.empty.hidden = true;
    const v = buildView(state.kind, state.layer, state.head);
    state.view = v;
    const rows = v.rowTok.length, cols = v.colTok.length;
    rowLabels = []; colLabels = [];

    const frag = document.createDocumentFragment();
    const corner = document.createElement('div');
    corner.className = 'corner';
    const keyAxis = document.createElement('span');
    keyAxis.className = 'axis axis-key';
    keyAxis.textContent = `${KINDS[state.kind].cols} →`;
    keyAxis.title = `columns: the ${KINDS[state.kind].cols} tokens attended to (keys)`;
    const queryAxis = document.createElement('span');
    queryAxis.className = 'axis axis-query';
    queryAxis.textContent = `${KINDS[state.kind].rows} ↓`;
    queryAxis.title = `rows: the ${KINDS[state.kind].rows} tokens attending (queries)`;
    corner.append(keyAxis, queryAxis);
    frag.append(corner);
    v.colTok.forEach((tok, c) => {
      const lab = document.createElement('div');
      lab.className = 'clabel';
      lab.dataset.col = String(c);
      lab.title = tokenText(tok);
      lab.style.gridRow = '1';
      lab.style.gridColumn = String(c + 2);
      lab.append(columnText(tok));
      frag.append(lab);
      colLabels.push(lab);
    });
    for (let rr = 0; rr < rows; ++rr) {
      const lab = document.createElement('div');
      lab.className = 'rlabel';
      lab.dataset.row = String(rr);
      lab.title = tokenText(v.rowTok[rr]);
      lab.style.gridRow = String(rr + 2);
      lab.style.gridColumn = '1';
      renderToken(lab, v.rowTok[rr]);
      frag.append(lab);
      rowLabels.push(lab);
    }
    // The cells: one canvas over the grid's cell area, drawn by drawCells.
    canvas = document.createElement('canvas');
    canvas.className = 'cells';
    canvas.style.gridRow = `2 / span ${Math.max(rows, 1)}`;
    canvas.style.gridColumn = `2 / span ${Math.max(cols, 1)}`;
    canvas.dataset.rows = String(rows);
    canvas.dataset.cols = String(cols);
    frag.append(canvas);
    state.showNumbers = cols <= 14 && rows <= 14;
    el.heatmap.style.gridTemplateColumns = `max-content repeat(${cols}, var(--cell))`;
    el.heatmap.setAttribute('aria-label',
      `${KINDS[state.kind].name}, layer ${state.layer + 1}, ${state.head === 'mean' ? 'mean of heads' : 'head ' + (Number(state.head) + 1)}: ` +
      `${rows} query rows by ${cols} key columns. Use the arrow keys to read values.`);
    el.heatmap.replaceChildren(frag);
    state.active = null;
    el.readout.textContent = TOUCH ? 'Tap a cell to read its value.'
      : 'Hover over a cell (or focus the map and use the arrow keys) to read its value.';
    fitCells();
    renderLegend();
    renderOverview();
  }

  // A cell's weight as shown (0 for a masked future position), and whether it is masked.
  function cellAt(r, c) {
    const v = state.view;
    const masked = v.causal && c > r;
    return { masked, value: masked ? 0 : Number((v.m[r] || [])[c]) || 0 };
  }

  // Draws every cell: its colour, its number where legible, the hatching of
  // masked ones, the outline of the active one.
  function drawCells() {
    const v = state.view;
    if (!v || !canvas) return;
    const rows = v.rowTok.length, cols = v.colTok.length;
    const size = state.cellSize || 20, pitch = size + GAP;
    const w = Math.max(cols * pitch - GAP, 1), h = Math.max(rows * pitch - GAP, 1);
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${w}px`;
    canvas.style.height = `${h}px`;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const numbers = el.heatmap.classList.contains('numbers');
    ctx.font = `${Math.max(9, size * 0.3)}px system-ui, sans-serif`;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    const hatch = ctx.createPattern(hatchTile(), 'repeat');
    for (let r = 0; r < rows; ++r) {
      for (let c = 0; c < cols; ++c) {
        const x = c * pitch, y = r * pitch;
        const { masked, value } = cellAt(r, c);
        ctx.fillStyle = masked ? hatch : LUT_CSS[lutIndex(value)];
        roundRect(ctx, x, y, size, size, 2);
        ctx.fill();
        if (numbers && !masked) {
          ctx.fillStyle = lutIndex(value) > 140 ? '#fff' : '#1b2130';
          ctx.fillText(value >= 0.995 ? '1' : value.toFixed(2).replace(/^0/, ''), x + size / 2, y + size / 2 + 0.5);
        }
      }
    }
    if (state.active) {
      ctx.strokeStyle = '#111827';
      ctx.lineWidth = 2;
      ctx.strokeRect(state.active.c * pitch + 1, state.active.r * pitch + 1, size - 2, size - 2);
    }
  }
  function roundRect(ctx, x, y, w, h, radius) {
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(x, y, w, h, radius);
    else ctx.rect(x, y, w, h);
  }
  let hatchCanvas = null;
  function hatchTile() {  // the masked cells' diagonal hatching, as a repeating tile
    if (hatchCanvas) return hatchCanvas;
    hatchCanvas = document.createElement('canvas');
    hatchCanvas.width = hatchCanvas.height = 6;
    const t = hatchCanvas.getContext('2d');
    t.fillStyle = '#f5f6f8';
    t.fillRect(0, 0, 6, 6);
    t.strokeStyle = '#dfe3e9';
    t.lineWidth = 1.5;
    t.beginPath();
    for (let k = -6; k <= 12; k += 6) { t.moveTo(k, 6); t.lineTo(k + 6, 0); }
    t.stroke();
    return hatchCanvas;
  }
  // The cell under a point of the page (null outside the map; a point on the
  // gap between two cells counts as the cell before it).
  function cellFromPoint(clientX, clientY) {
    const v = state.view;
    if (!v || !canvas) return null;
    const box = canvas.getBoundingClientRect();
    const pitch = (state.cellSize || 20) + GAP;
    const x = clientX - box.left, y = clientY - box.top;
    const c = Math.floor(x / pitch), r = Math.floor(y / pitch);
    if (x < 0 || y < 0 || r >= v.rowTok.length || c >= v.colTok.length) return null;
    return { r, c };
  }
  function cellRect(r, c) {
    const box = canvas.getBoundingClientRect();
    const size = state.cellSize || 20, pitch = size + GAP;
    const left = box.left + c * pitch, top = box.top + r * pitch;
    return { left, top, right: left + size, bottom: top + size, x: left, y: top };
  }

  // Square cells sized to fill the width (and, where it can, the height) left
  // for the map: 40 tokens fit in ~800 px.
  function fitCells() {
    const v = state.view;
    if (!v || el.heatmap.hidden) return;
    const rows = Math.max(v.rowTok.length, 1), cols = Math.max(v.colTok.length, 1);
    const hm = el.heatmap;
    const area = el.mapArea.getBoundingClientRect();
    const areaW = el.mapArea.clientWidth - 6;
    const below = 72;  // the readout line, the panel's and the page's padding
    let size = 20;
    // Twice: the labels' size follows the cells' (their font does).
    for (let pass = 0; pass < 2; ++pass) {
      hm.style.setProperty('--cell', `${size}px`);
      hm.style.setProperty('--label-font', `${labelFont(size)}px`);
      const labelW = rowLabels.length ? rowLabels[0].getBoundingClientRect().width : 0;
      // The column labels' row: as tall as the longest label, at most 110 px
      // (a grid row does not size itself to vertical text reliably).
      hm.style.gridTemplateRows = 'auto';
      let labelH = 0;
      for (const lab of colLabels) {
        const t = lab.firstChild;
        labelH = Math.max(labelH, t.classList.contains('rot') ? t.offsetWidth : t.offsetHeight);
      }
      labelH = Math.min(Math.max(labelH + 8, 28), 118);
      hm.style.gridTemplateRows = `${labelH}px repeat(${rows}, var(--cell))`;
      const byWidth = Math.floor((areaW - labelW) / cols) - 1;
      const byHeight = Math.floor((window.innerHeight - (area.top + window.scrollY) - labelH - below) / rows) - 1;
      // Fit the window's height too, down to 15 px; below that the map scrolls.
      // On a touch screen a cell is a finger's target and keeps 28 px: the map
      // then pans inside its area instead of shrinking to unreadable cells.
      size = Math.max(Math.min(byWidth, 40, Math.max(byHeight, 15)), TOUCH ? 28 : 12);
    }
    hm.style.setProperty('--cell', `${size}px`);
    hm.style.setProperty('--label-font', `${labelFont(size)}px`);
    // Numbers only where they are legible (at least 9 px, in cells of 26 px).
    hm.classList.toggle('numbers', Boolean(state.showNumbers) && size >= 26);
    state.cellSize = size;
    drawCells();
  }
  const labelFont = (size) => Math.max(10.5, Math.min(14, Math.round(size * 0.66)));

  // ---- hover / keyboard readout -------------------------------------------
  function setActive(r, c, anchor) {
    const v = state.view;
    if (!v) return;
    const rows = v.rowTok.length, cols = v.colTok.length;
    if (r < 0 || c < 0 || r >= rows || c >= cols) return;
    clearHighlight(false);  // drawn once below, with the new cell outlined
    state.active = { r, c };
    drawCells();
    rowLabels[r].classList.add('hl');
    colLabels[c].classList.add('hl');
    const cell = cellAt(r, c);
    const masked = cell.masked;
    const q = tokenText(v.rowTok[r]), k = tokenText(v.colTok[c]);
    const value = cell.value.toFixed(4);
    el.heatmap.dataset.active = `${r},${c}`;
    const predicting = v.predicts && v.predicts[r] !== undefined ? ` (predicting “${tokenText(v.predicts[r])}”)` : '';
    el.readout.textContent = masked
      ? `${q} → ${k}: masked, a future position (0)`
      : `${q} → ${k}: ${value}  ·  row ${r + 1}, column ${c + 1}${predicting}`;

    const tt = el.tooltip;
    tt.textContent = '';
    const line = document.createElement('div');
    line.className = 'tt-pair';
    const qs = document.createElement('span'); renderToken(qs, v.rowTok[r]); qs.className += ' tt-tok';
    const ks = document.createElement('span'); renderToken(ks, v.colTok[c]); ks.className += ' tt-tok';
    line.append(qs, ' → ', ks, ': ');
    const val = document.createElement('b');
    val.textContent = masked ? 'masked' : value;
    line.append(val);
    tt.append(line);
    const sub = document.createElement('div');
    sub.className = 'tt-sub';
    sub.textContent = masked ? 'future position, not visible to the decoder'
      : `row ${r + 1}, col ${c + 1}` + predicting;
    tt.append(sub);
    tt.hidden = false;
    placeTooltip(anchor || cellRect(r, c));
  }

  function placeTooltip(a) {
    const tt = el.tooltip;
    const w = tt.offsetWidth, h = tt.offsetHeight;
    let x = (a.right !== undefined ? a.right : a.x) + 12;
    let y = (a.bottom !== undefined ? a.bottom : a.y) + 12;
    if (x + w > window.innerWidth - 8) x = (a.left !== undefined ? a.left : a.x) - w - 12;
    if (y + h > window.innerHeight - 8) y = (a.top !== undefined ? a.top : a.y) - h - 12;
    tt.style.left = `${Math.max(4, x)}px`;
    tt.style.top = `${Math.max(4, y)}px`;
  }

  function clearHighlight(redraw = true) {
    for (const n of el.heatmap.querySelectorAll('.hl')) n.classList.remove('hl');
    delete el.heatmap.dataset.active;
    if (state.active) {
      state.active = null;
      if (redraw) drawCells();
    }
  }
  function hideTooltip() {
    el.tooltip.hidden = true;
  }

  // A tap shows the cell's weight (a touch screen has no hover).
  el.heatmap.addEventListener('click', (e) => {
    const hit = cellFromPoint(e.clientX, e.clientY);
    if (hit) setActive(hit.r, hit.c, cellRect(hit.r, hit.c));
  });
  el.heatmap.addEventListener('mousemove', (e) => {
    const hit = cellFromPoint(e.clientX, e.clientY);
    if (!hit) return;
    const { r, c } = hit;
    if (!state.active || state.active.r !== r || state.active.c !== c) setActive(r, c, { x: e.clientX, y: e.clientY });
    else placeTooltip({ x: e.clientX, y: e.clientY });
  });
  el.heatmap.addEventListener('mouseleave', () => {
    hideTooltip();
    if (document.activeElement !== el.heatmap) clearHighlight();
  });
  el.heatmap.addEventListener('keydown', (e) => {
    const v = state.view;
    if (!v) return;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const a = state.active || { r: 0, c: 0 };
    if (moves[e.key]) {
      e.preventDefault();
      const r = Math.min(Math.max(a.r + moves[e.key][0], 0), v.rowTok.length - 1);
      const c = Math.min(Math.max(a.c + moves[e.key][1], 0), v.colTok.length - 1);
      setActive(r, c);
    } else if (e.key === 'Home' || e.key === 'End') {
      e.preventDefault();
      setActive(a.r, e.key === 'Home' ? 0 : v.colTok.length - 1);
    } else if (e.key === 'Escape') {
      hideTooltip();
      clearHighlight();
    }
  });
  el.heatmap.addEventListener('focus', () => {
    if (state.view && !state.active) setActive(0, 0);
  });
  el.heatmap.addEventListener('blur', () => { hideTooltip(); clearHighlight(); });

  // ---- legend -------------------------------------------------------------
  function renderLegend() {
    const lg = el.legend;
    lg.textContent = '';
    const title = document.createElement('span');
    title.className = 'legend-title';
    title.textContent = state.scale === 'sqrt' ? 'Weight (square-root scale)' : 'Weight (linear scale)';
    const row = document.createElement('div');
    row.className = 'legend-row';
    const wrap = document.createElement('div');
    wrap.className = 'legend-scale';
    const bar = document.createElement('div');
    bar.className = 'legend-bar';
    const stops = [];
    for (let i = 0; i <= 16; ++i) stops.push(`${LUT_CSS[Math.round((i / 16) * 255)]} ${(i / 16) * 100}%`);
    bar.style.background = `linear-gradient(to right, ${stops.join(', ')})`;
    wrap.append(bar);
    const ticks = state.scale === 'sqrt' ? [0, 0.05, 0.25, 0.5, 1] : [0, 0.25, 0.5, 0.75, 1];
    const tickBox = document.createElement('div');
    tickBox.className = 'legend-ticks';
    for (const t of ticks) {
      const s = document.createElement('span');
      s.style.left = `${scaled(t) * 100}%`;
      s.textContent = t === 0 || t === 1 ? String(t) : String(t).replace(/^0/, '');
      tickBox.append(s);
    }
    wrap.append(tickBox);
    row.append(wrap);
    if (state.kind === 'decoder_self') {
      const m = document.createElement('span');
      m.className = 'legend-masked';
      const sw = document.createElement('span');
      sw.className = 'swatch masked';
      m.append(sw, 'masked');
      m.title = 'future positions, hidden from the decoder';
      row.append(m);
    }
    lg.append(title, row);
    lg.setAttribute('aria-label', `Colour legend: ${title.textContent}, pale is 0, dark blue is 1` +
      (state.kind === 'decoder_self' ? '; hatched cells are masked future positions' : ''));
  }

  // ---- overview: every layer x (mean, heads) of the current kind ---------
  function renderOverview() {
    const ov = el.overview;
    ov.textContent = '';
    const r = current();
    const { layers, heads } = dims(state.kind);
    if (!r || !layers) {
      ov.classList.add('placeholder');
      ov.textContent = 'Thumbnails of every layer and head appear here after a translation.';
      return;
    }
    ov.classList.remove('placeholder');
    ov.style.gridTemplateColumns = `auto repeat(${heads + 1}, minmax(0, 1fr))`;
    ov.append(document.createElement('span'));
    const headKeys = ['mean', ...Array.from({ length: heads }, (_, h) => String(h))];
    for (const h of headKeys) {
      const s = document.createElement('span');
      s.className = 'ov-head';
      s.textContent = h === 'mean' ? 'mean' : `h${Number(h) + 1}`;
      ov.append(s);
    }
    for (let l = 0; l < layers; ++l) {
      const s = document.createElement('span');
      s.className = 'ov-layer';
      s.textContent = `L${l + 1}`;
      ov.append(s);
      for (const h of headKeys) {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'thumb';
        const selected = l === state.layer && h === String(state.head);
        if (selected) b.classList.add('selected');
        b.setAttribute('aria-pressed', String(selected));
        b.setAttribute('aria-label', `Layer ${l + 1}, ${h === 'mean' ? 'mean of heads' : 'head ' + (Number(h) + 1)}`);
        b.title = b.getAttribute('aria-label');
        b.append(thumbCanvas(buildView(state.kind, l, h)));
        b.addEventListener('click', () => {
          state.layer = l;
          state.head = h;
          el.layer.value = String(l);
          el.head.value = h;
          render();
        });
        ov.append(b);
      }
    }
  }

  function thumbCanvas(v) {
    const rows = v.rowTok.length, cols = v.colTok.length;
    const cv = document.createElement('canvas');
    cv.width = Math.max(cols, 1);
    cv.height = Math.max(rows, 1);
    const ctx = cv.getContext('2d');
    const img = ctx.createImageData(cv.width, cv.height);
    for (let r = 0; r < rows; ++r) {
      for (let c = 0; c < cols; ++c) {
        const rgb = v.causal && c > r ? MASKED_RGB : LUT[lutIndex(Number(v.m[r][c]) || 0)];
        const o = (r * cols + c) * 4;
        img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    return cv;
  }

  // ---- wiring -------------------------------------------------------------
  el.form.addEventListener('submit', (e) => { e.preventDefault(); translate(); });
  el.source.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); }
  });
  el.source.addEventListener('input', () => { if (el.error.textContent && !state.busy) showError(''); });
  el.kind.addEventListener('change', () => { state.kind = el.kind.value; fillLayerHead(); render(); });
  el.layer.addEventListener('change', () => { state.layer = Number(el.layer.value); render(); });
  el.head.addEventListener('change', () => { state.head = el.head.value; render(); });
  el.scale.addEventListener('change', () => { state.scale = el.scale.value; render(); });
  el.sentence.addEventListener('change', () => selectSentence(Number(el.sentence.value)));
  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(fitCells, 100);
  });
  if (navigator.platform && /Mac/.test(navigator.platform)) {
    const k = el.form.querySelector('.kbd-hint kbd');
    if (k) k.textContent = '⌘';
  }

  state.kind = el.kind.value;
  state.scale = el.scale.value;
  fillLayerHead();
  render();
  loadInfo();
})();
