export {
  providerContract,
  type ContractAssertions,
  type ContractTest,
  type ProviderContractOptions,
  type UpstreamScript,
} from './provider-contract.js';
