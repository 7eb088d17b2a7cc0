export { callCost, picoOfUsd, tokenPrice, usdOfPico, type ModelPrice, type TokenPrice } from './price.js';
export { priceCatalog, type PricedCatalog } from './price-table.js';
