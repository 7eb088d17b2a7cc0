/** The floors' MODELS variable: `client=upstream` pairs of model names, comma-separated. */
export const modelPairs = (models: Record<string, string>): string =>
  Object.entries(models)
    .map((pair) => pair.join('='))
    .join(',');

/** What `modelPairs` wrote, as a Map from the client's model name to the upstream's. */
export const readModelPairs = (text = ''): Map<string, string> =>
  new Map(
    text
      .split(',')
      .filter(Boolean)
      .map((pair) => pair.split('=') as [string, string]),
  );
