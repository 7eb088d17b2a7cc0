import { isObject, type JsonObject } from '../http/json-body.js';

export { isObject, type JsonObject };
