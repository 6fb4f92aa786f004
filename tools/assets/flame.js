/*
 * ptfil's flame graph: click to zoom, hover for details, search, and the
 * charged / reserved layouts. The boxes are laid out by ptfil-view already
 * (so the SVG shows without script); this redraws them when the view changes.
 * It runs in a standalone SVG document and inline in the HTML report: it binds
 * to every <svg class="ptfil-flame"> and to the [data-act] controls around it.
 *
 * Each <g class="frame"> (preorder, after the one <g class="total">) carries
 * data-p (its parent's index, 0 for the total), and per layout its weight and
 * its offset inside its parent in bytes: data-w/data-o (charged) and
 * data-wr/data-or (reserved). Its <title> starts with the full frame label.
 */
(function () {
	'use strict';

	var UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

	/* As view_format_size in C: binary units, one decimal. */
	function formatSize(b) {
		if (b < 1024)
			return Math.round(b) + ' B';
		var v = b / 1024, u = 0;
		while (u + 1 < UNITS.length && v >= 1023.95) {
			v /= 1024;
			u++;
		}
		return v.toFixed(1) + ' ' + UNITS[u];
	}

	function num(el, name) {
		var v = parseFloat(el.getAttribute(name));
		return isFinite(v) ? v : 0;
	}

	function Flame(svg) {
		var self = this;
		var box = (svg.parentNode && svg.parentNode.closest && svg.parentNode.closest('.flamebox')) || svg;
		var ns = svg.namespaceURI;
		var els = [svg.querySelector('g.total')].concat([].slice.call(svg.querySelectorAll('g.frame')));
		var n = els.length;
		var W = num(svg, 'data-width'), X0 = num(svg, 'data-x0');
		var parent = new Int32Array(n), end = new Int32Array(n);
		var w = new Float64Array(n), o = new Float64Array(n), wr = new Float64Array(n), or = new Float64Array(n);
		var label = new Array(n), rects = new Array(n), texts = new Array(n), marks = new Array(n), res = new Array(n);
		var details = svg.querySelector('.details'), status = svg.querySelector('.status');
		var hint = details ? details.textContent : '';
		var zoomed = 0, reserved = false, term = '';

		if (!els[0])
			return;
		for (var i = 0; i < n; i++) {
			var g = els[i];
			g.setAttribute('data-i', i);
			parent[i] = i ? num(g, 'data-p') : -1;
			if (parent[i] >= i)
				parent[i] = 0;  /* cannot happen: parents come first */
			w[i] = num(g, 'data-w');
			o[i] = num(g, 'data-o');
			wr[i] = num(g, 'data-wr');
			or[i] = num(g, 'data-or');
			var t = g.querySelector('title');
			label[i] = t ? t.textContent.split('\n')[0] : '';
			rects[i] = g.querySelector('rect.b');
			marks[i] = g.querySelector('rect.sp');
			texts[i] = g.querySelector('text');
			res[i] = null;
			end[i] = i + 1;
		}
		/* Each subtree is a run of the preorder: [i, end[i]). */
		for (i = n - 1; i > 0; i--)
			if (end[i] > end[parent[i]])
				end[parent[i]] = end[i];

		function fit(i, width) {
			var chars = Math.floor((width - 6) / 7);
			var s = label[i];
			if (chars < 3)
				return '';
			return s.length <= chars ? s : s.slice(0, chars - 2) + '..';
		}

		function place(i, x, width, shown) {
			var g = els[i], r = rects[i];
			if (!shown) {
				g.style.display = 'none';
				return;
			}
			g.style.display = '';
			r.setAttribute('x', x.toFixed(2));
			r.setAttribute('width', width.toFixed(2));
			if (marks[i]) {
				marks[i].setAttribute('x', x.toFixed(2));
				marks[i].setAttribute('width', width.toFixed(2));
			}
			if (reserved) {
				if (!res[i]) {
					res[i] = document.createElementNS(ns, 'rect');
					res[i].setAttribute('class', 'res');
					res[i].setAttribute('y', r.getAttribute('y'));
					res[i].setAttribute('height', r.getAttribute('height'));
					res[i].setAttribute('fill', r.getAttribute('fill'));
					g.insertBefore(res[i], r.nextSibling);
				}
				var part = wr[i] > 0 ? Math.min(1, w[i] / wr[i]) : 1;
				res[i].setAttribute('x', x.toFixed(2));
				res[i].setAttribute('width', (width * part).toFixed(2));
			}
			if (texts[i]) {
				texts[i].setAttribute('x', (x + 3).toFixed(2));
				texts[i].textContent = i ? fit(i, width) : totalText(width);
			}
		}

		var totalLabel = els[0].querySelector('text') ? els[0].querySelector('text').textContent : '';
		function totalText(width) {
			return width > 7 * totalLabel.length ? totalLabel : 'all';
		}

		function layout() {
			var ww = reserved ? wr : w, oo = reserved ? or : o;
			var x = new Float64Array(n), width = new Float64Array(n);
			var anc = new Uint8Array(n);
			for (var a = zoomed; a >= 0; a = parent[a])
				anc[a] = 1;
			var scale = ww[zoomed] > 0 ? W / ww[zoomed] : 0;
			for (var i = 0; i < n; i++) {
				var inside = i > zoomed && i < end[zoomed];
				if (anc[i]) {
					x[i] = X0;
					width[i] = W;
				} else if (inside) {
					x[i] = x[parent[i]] + oo[i] * scale;
					width[i] = ww[i] * scale;
				}
				place(i, x[i], width[i], anc[i] || inside);
				els[i].classList.toggle('anc', anc[i] === 1 && i !== zoomed);
			}
			svg.setAttribute('data-zoom', zoomed);
			svg.setAttribute('data-mode', reserved ? 'reserved' : 'charged');
			svg.classList.toggle('reserved', reserved);
			controls('reset', function (c) { c.classList.toggle('off', zoomed === 0); });
			controls('mode', function (c) {
				c.textContent = reserved ? 'Width: reserved (show charged)' : 'Width: charged (show reserved)';
			});
			mark();
		}

		function controls(act, fn) {
			var list = box.querySelectorAll('[data-act="' + act + '"]');
			for (var i = 0; i < list.length; i++)
				fn(list[i]);
		}

		/* Highlights the frames whose label holds term; says how much of the total they hold, nested matches once. */
		function mark() {
			var t = term.toLowerCase(), sum = 0, count = 0, within = -1;
			var ww = reserved ? wr : w;
			for (var i = 1; i < n; i++) {
				var hit = t !== '' && label[i].toLowerCase().indexOf(t) >= 0;
				els[i].classList.toggle('match', hit);
				if (!hit)
					continue;
				count++;
				if (within >= 0 && i < end[within])
					continue;
				within = i;
				sum += ww[i];
			}
			var text = '';
			if (t !== '') {
				text = count + ' frame' + (count === 1 ? '' : 's') + ' match "' + term + '"';
				if (count)
					text += ': ' + formatSize(sum) + ', ' + (ww[0] > 0 ? (100 * sum / ww[0]).toFixed(1) : '0.0') +
						'% of all ' + (reserved ? 'reserved' : 'charged');
			}
			if (status)
				status.textContent = text;
			controls('clear', function (c) { c.classList.toggle('off', t === ''); });
			controls('search-status', function (c) { c.textContent = text; });
			svg.setAttribute('data-matches', count);
		}

		self.zoom = function (i) {
			zoomed = i > 0 && i < n ? i : 0;
			layout();
		};
		self.setReserved = function (on) {
			reserved = !!on;
			layout();
		};
		self.search = function (s) {
			term = s || '';
			controls('search-input', function (c) { if (c.value !== term) c.value = term; });
			mark();
		};
		self.reset = function () {
			zoomed = 0;
			term = '';
			controls('search-input', function (c) { c.value = ''; });
			layout();
		};

		function frameOf(e) {
			var g = e.target && e.target.closest ? e.target.closest('g.frame, g.total') : null;
			return g && svg.contains(g) ? +g.getAttribute('data-i') : -1;
		}
		svg.addEventListener('click', function (e) {
			var i = frameOf(e);
			if (i >= 0)
				self.zoom(i === zoomed ? parent[i] : i);
		});
		svg.addEventListener('mouseover', function (e) {
			var i = frameOf(e);
			if (i < 0 || !details)
				return;
			var t = els[i].querySelector('title');
			details.textContent = t ? t.textContent.replace(/\n/g, ' \u00b7 ') : '';
		});
		svg.addEventListener('mouseout', function (e) {
			if (details && frameOf(e) >= 0)
				details.textContent = hint;
		});
		controls('reset', function (c) { c.addEventListener('click', function () { self.zoom(0); }); });
		controls('mode', function (c) { c.addEventListener('click', function () { self.setReserved(!reserved); }); });
		controls('clear', function (c) { c.addEventListener('click', function () { self.search(''); }); });
		controls('search', function (c) {
			c.addEventListener('click', function () {
				var s = window.prompt('Highlight the frames whose name contains:', term);
				if (s !== null)
					self.search(s);
			});
		});
		controls('search-input', function (c) {
			c.addEventListener('input', function () { self.search(c.value); });
		});
		self.ask = function () {
			var input = box.querySelector('[data-act="search-input"]');
			if (input) {
				input.focus();
				input.select();
				return;
			}
			var s = window.prompt('Highlight the frames whose name contains:', term);
			if (s !== null)
				self.search(s);
		};
		layout();
	}

	var flames = [];
	function init() {
		var list = document.querySelectorAll('svg.ptfil-flame');
		for (var i = 0; i < list.length; i++)
			flames.push(new Flame(list[i]));
	}

	document.addEventListener('keydown', function (e) {
		var f = flames[0];
		if (!f || !f.zoom)
			return;
		var typing = e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'TEXTAREA');
		if (e.key === 'Escape') {
			f.reset();
			if (typing)
				e.target.blur();
		} else if (!typing && (e.key === '/' || ((e.ctrlKey || e.metaKey) && e.key === 'f' &&
							  document.documentElement.tagName.toLowerCase() === 'svg'))) {
			e.preventDefault();
			f.ask();
		}
	});

	if (document.readyState === 'loading')
		document.addEventListener('DOMContentLoaded', init);
	else
		init();
	window.ptfilFlames = flames;
})();
