import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js';
import { useEffect, useRef } from 'preact/hooks';
import { formatCount, formatUsd } from './format.ts';
import type { Stack } from './usage-data.ts';

// Only what a stacked bar chart needs: the rest of Chart.js stays out of the bundle.
Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

/** Told apart by people with the common colour-vision deficiencies (Okabe and Ito); grey is "Other". */
const COLOURS = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00', '#f0e442', '#9aa3b2'];

/**
 * One stacked bar chart of a figure per day, drawn by Chart.js on a canvas: its labels (model ids,
 * key ids) are painted as text, never parsed as markup. The canvas is an image to assistive
 * technology; the figures themselves are in the table under the charts.
 */
export function UsageChart({ title, days, stacks, figure }: { title: string; days: string[]; stacks: Stack[]; figure: 'requests' | 'tokens' | 'cost' }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const format = figure === 'cost' ? formatUsd : formatCount;
    const chart = new Chart(canvas.current, {
      type: 'bar',
      data: {
        // Month and day: the year and the UTC are in the table.
        labels: days.map((day) => day.slice(5)),
        datasets: stacks.map((stack, index) => ({
          label: stack.name,
          data: stack[figure],
          backgroundColor: COLOURS[index % COLOURS.length],
        })),
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: 'index', intersect: false },
        scales: {
          x: { stacked: true, grid: { display: false } },
          y: { stacked: true, beginAtZero: true, ticks: { ...(figure === 'cost' ? {} : { precision: 0 }), callback: (value) => format(Number(value)) } },
        },
        plugins: {
          legend: { position: 'bottom', labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${format(Number(item.raw))}` } },
        },
      },
    });
    return () => chart.destroy();
  }, [days, stacks, figure]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div class="chart-area">
        <canvas ref={canvas} role="img" aria-label={`${title}: a stacked bar chart; its figures are in the table below.`} />
      </div>
    </figure>
  );
}
