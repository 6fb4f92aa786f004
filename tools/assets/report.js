/*
 * ptfil's HTML report: the timeline's read-out under the pointer, and tables
 * sorted by a click on a column heading. The flame graph is flame.js's.
 */
(function () {
	'use strict';

	var UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

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

	function formatTime(t) {
		var m = Math.abs(t);
		return m < 1 ? (t * 1000).toFixed(1) + ' ms' : m < 100 ? t.toFixed(2) + ' s' : t.toFixed(0) + ' s';
	}

	function list(el, name) {
		var s = el ? el.getAttribute(name) : '';
		return s ? s.split(',').map(Number) : [];
	}

	/* The index of the time in ts (ascending) nearest to t. */
	function nearest(ts, t) {
		var lo = 0, hi = ts.length - 1;
		while (lo < hi) {
			var mid = (lo + hi) >> 1;
			if (ts[mid] < t)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo > 0 && t - ts[lo - 1] < ts[lo] - t)
			lo--;
		return lo;
	}

	function timeline(svg) {
		var charged = svg.querySelector('polyline.charged'), rss = svg.querySelector('polyline.rss');
		var ct = list(charged, 'data-t'), cv = list(charged, 'data-v');
		var rt = list(rss, 'data-t'), rv = list(rss, 'data-v');
		var cursor = svg.querySelector('g.cursor');
		if (!cursor || ct.length === 0)
			return;
		var line = cursor.querySelector('line'), text = cursor.querySelector('text');
		var t0 = +svg.getAttribute('data-t0'), t1 = +svg.getAttribute('data-t1');
		var x0 = +svg.getAttribute('data-px0'), x1 = +svg.getAttribute('data-px1');

		svg.addEventListener('mousemove', function (e) {
			var m = svg.getScreenCTM();
			if (!m)
				return;
			var p = new DOMPoint(e.clientX, e.clientY).matrixTransform(m.inverse());
			if (p.x < x0 || p.x > x1) {
				cursor.setAttribute('visibility', 'hidden');
				return;
			}
			var t = t0 + (p.x - x0) / (x1 - x0) * (t1 - t0);
			var i = nearest(ct, t), j = rt.length ? nearest(rt, t) : -1;
			var x = x0 + (ct[i] - t0) / (t1 - t0) * (x1 - x0);
			line.setAttribute('x1', x);
			line.setAttribute('x2', x);
			text.setAttribute('x', x > (x0 + x1) / 2 ? x - 6 : x + 6);
			text.setAttribute('text-anchor', x > (x0 + x1) / 2 ? 'end' : 'start');
			text.textContent = formatTime(ct[i]) + ': charged ' + formatSize(cv[i]) +
				(j >= 0 ? ', RSS ' + formatSize(rv[j]) : '');
			cursor.setAttribute('visibility', 'visible');
		});
		svg.addEventListener('mouseleave', function () {
			cursor.setAttribute('visibility', 'hidden');
		});
	}

	function cellValue(row, col) {
		var c = row.cells[col];
		if (!c)
			return '';
		var v = c.getAttribute('data-v');
		return v !== null ? parseFloat(v) : c.textContent.toLowerCase();
	}

	function sortable(table) {
		var heads = table.tHead ? table.tHead.rows[0].cells : [];
		[].forEach.call(heads, function (th, col) {
			th.setAttribute('tabindex', '0');
			th.title = 'Sort by this column';
			function sort() {
				var body = table.tBodies[0];
				var rows = [].slice.call(body.rows).filter(function (r) { return !r.classList.contains('more'); });
				var rest = [].slice.call(body.rows).filter(function (r) { return r.classList.contains('more'); });
				var down = th.getAttribute('aria-sort') !== 'descending';
				rows.sort(function (a, b) {
					var x = cellValue(a, col), y = cellValue(b, col);
					var c = x < y ? -1 : x > y ? 1 : 0;
					return down ? -c : c;
				});
				[].forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
				th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
				rows.concat(rest).forEach(function (r) { body.appendChild(r); });
			}
			th.addEventListener('click', sort);
			th.addEventListener('keydown', function (e) {
				if (e.key === 'Enter' || e.key === ' ') {
					e.preventDefault();
					sort();
				}
			});
		});
	}

	function init() {
		[].forEach.call(document.querySelectorAll('svg.timeline'), timeline);
		[].forEach.call(document.querySelectorAll('table.sortable'), sortable);
	}

	if (document.readyState === 'loading')
		document.addEventListener('DOMContentLoaded', init);
	else
		init();
})();
