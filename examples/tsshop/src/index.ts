export { chargeCard as pay } from "./payments";
